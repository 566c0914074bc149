package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/action"
	"github.com/expiryctl/expiryctl/tui/audit"
	"github.com/expiryctl/expiryctl/tui/detail"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
	"github.com/expiryctl/expiryctl/tui/list"
	"github.com/expiryctl/expiryctl/tui/requests"
	"github.com/expiryctl/expiryctl/tui/run"
	"github.com/expiryctl/expiryctl/tui/summary"
)

// Screen names a screen of the TUI.
type Screen int

// The screens. Detail is reached from Letters and shown under its tab.
const (
	ScreenSummary Screen = iota
	ScreenLetters
	ScreenRequests
	ScreenAudit
	ScreenRun
	ScreenDetail
)

var tabs = []struct {
	screen Screen
	name   string
}{{ScreenSummary, "Summary"}, {ScreenLetters, "Letters"}, {ScreenRequests, "Requests"}, {ScreenAudit, "Audit"}, {ScreenRun, "Run"}}

// DefaultRefresh is how often the shown screen reloads (the summary) or
// retries what failed (the others).
const DefaultRefresh = 2 * time.Second

// toastFor is how long a toast stays up.
const toastFor = 10 * time.Second

// defaultWidth and defaultHeight are the layout before the terminal said
// its size.
const defaultWidth, defaultHeight = 80, 24

// Option configures New.
type Option func(*options)

type options struct {
	renderer *lipgloss.Renderer
	refresh  time.Duration
	notes    io.Writer
}

// WithRenderer draws with r; make it with termenv.Ascii for NO_COLOR. The
// default renders to stdout with the profile lipgloss detects.
func WithRenderer(r *lipgloss.Renderer) Option { return func(o *options) { o.renderer = r } }

// WithRefresh sets the refresh tick (DefaultRefresh); 0 turns it off, and
// the search's debounce with it, for tests and benchmarks that drive the
// model by hand.
func WithRefresh(d time.Duration) Option { return func(o *options) { o.refresh = d } }

// WithNotes has Run write to w, once the screen is left, what the operator
// needs to know then: how to resume a run the TUI stopped.
func WithNotes(w io.Writer) Option { return func(o *options) { o.notes = w } }

type tickMsg struct{}

// debounceFor is the search count's debounce under the refresh tick: none
// when timers are off.
func debounceFor(refresh time.Duration) time.Duration {
	if refresh <= 0 {
		return 0
	}
	return list.DefaultDebounce
}

type toastKind int

const (
	toastInfo toastKind = iota
	toastRefusal
	toastError
)

// Model is the root model: it owns the layout, the tabs, the banner and the
// help, routes keys to the shown screen and every other message to all of
// them, and holds no state of theirs.
type Model struct {
	svc     Services
	keys    KeyMap
	help    help.Model
	theme   *frame.Theme
	now     func() time.Time
	refresh time.Duration

	width, height int
	bodyHeight    int

	active   Screen
	history  []Screen
	showHelp bool
	form     *form.Model

	summary  summary.Model
	list     list.Model
	detail   detail.Model
	requests requests.Model
	audit    audit.Model
	run      run.Model

	outage     string
	toast      string
	toastKind  toastKind
	toastUntil time.Time

	// quitting is the question before quitting with a run in progress;
	// interrupted is set when ctrl+c asked to quit; exitNote is said on
	// stderr once the screen is left (notes).
	quitKeys    QuitKeyMap
	quitting    quitState
	interrupted bool
	exitNote    string
	notes       io.Writer
}

// New returns the TUI over svc. It opens no connection: everything it shows
// comes from calls on svc.
func New(svc Services, opts ...Option) Model {
	o := options{refresh: DefaultRefresh}
	for _, opt := range opts {
		opt(&o)
	}
	if svc.Now == nil {
		svc.Now = time.Now
	}
	ctx := frame.NewContext(defaultWidth, defaultHeight-2, o.renderer, svc.Now)
	ctx.Systems = svc.Systems
	h := help.New()
	th := ctx.Theme
	h.Styles = help.Styles{
		ShortKey: th.Key, ShortDesc: th.Renderer.NewStyle(), ShortSeparator: th.Dim, Ellipsis: th.Dim,
		FullKey: th.Key, FullDesc: th.Renderer.NewStyle(), FullSeparator: th.Dim,
	}
	m := Model{
		svc: svc, keys: DefaultKeyMap(), help: h, theme: th, now: svc.Now, refresh: o.refresh,
		quitKeys: DefaultQuitKeyMap(), notes: o.notes,
		summary:  summary.New(ctx, svc, o.refresh),
		list:     list.New(ctx, svc).WithDebounce(debounceFor(o.refresh)),
		detail:   detail.New(ctx, svc),
		requests: requests.New(ctx, svc),
		audit:    audit.New(ctx, svc),
		run:      run.New(ctx, svc),
	}
	return m.resize(defaultWidth, defaultHeight)
}

// Active is the screen shown.
func (m Model) Active() Screen { return m.active }

// FormOpen reports whether a form is shown.
func (m Model) FormOpen() bool { return m.form != nil }

// Banner is the text of the banner line(s): an outage and a toast.
func (m Model) Banner() string { return strings.TrimSpace(m.outage + " " + m.toast) }

// Letters is the letter list, for tests and the benchmark.
func (m Model) Letters() list.Model { return m.list }

// Init loads the summary and starts the refresh tick.
func (m Model) Init() tea.Cmd {
	var load tea.Cmd
	m.summary, load = m.summary.Refresh()
	return tea.Batch(load, m.tick())
}

func (m Model) tick() tea.Cmd {
	if m.refresh <= 0 {
		return nil
	}
	return tea.Tick(m.refresh, func(time.Time) tea.Msg { return tickMsg{} })
}

// bodyCtx is the frame the screens draw into.
func (m Model) bodyCtx() frame.Context {
	return frame.Context{Width: m.width, Height: m.bodyHeight, Theme: m.theme, Now: m.now}
}

// bannerLines wraps the banner to at most three lines of the width.
func (m Model) bannerLines() []string {
	text := m.Banner()
	if text == "" {
		return nil
	}
	lines := strings.Split(linewrap.Words(text, max(10, m.width)), "\n")
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return lines
}

// resize lays the screens out for a terminal of width × height, keeping
// header, banner and help line.
func (m Model) resize(width, height int) Model {
	m.width, m.height = max(20, width), max(6, height)
	m.help.Width = m.width
	return m.relayout(true)
}

// relayout gives the screens the body height left by the banner, when it
// changed (or always with force).
func (m Model) relayout(force bool) Model {
	body := max(1, m.height-2-len(m.bannerLines()))
	if !force && body == m.bodyHeight {
		return m
	}
	m.bodyHeight = body
	ctx := m.bodyCtx()
	m.summary = m.summary.SetFrame(ctx)
	m.list = m.list.SetFrame(ctx)
	m.detail = m.detail.SetFrame(ctx)
	m.requests = m.requests.SetFrame(ctx)
	m.audit = m.audit.SetFrame(ctx)
	m.run = m.run.SetFrame(ctx)
	if m.form != nil {
		f := m.form.SetFrame(ctx)
		m.form = &f
	}
	return m
}

// Update routes msg: keys to the form or the shown screen (after the global
// keys), navigation and banners to the root, and everything else to every
// screen, each of which ignores what is not its own.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m, cmd := m.update(msg)
	return m.relayout(false), cmd
}

func (m Model) update(msg tea.Msg) (Model, tea.Cmd) {
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		return m.resize(msg.Width, msg.Height), nil
	case tea.KeyMsg:
		// Keys typed faster than the program reads them arrive as one
		// message of several runes; outside a text input each is a command.
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && m.form == nil && !m.capturing() {
			var cmds []tea.Cmd
			for _, r := range msg.Runes {
				var cmd tea.Cmd
				m, cmd = m.update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
				cmds = append(cmds, cmd)
			}
			return m, tea.Batch(cmds...)
		}
		return m.handleKey(msg)
	case tickMsg:
		if !m.toastUntil.IsZero() && !m.now().Before(m.toastUntil) {
			m.toast, m.toastUntil = "", time.Time{}
		}
		var cmd tea.Cmd
		m, cmd = m.refreshActive()
		return m, tea.Batch(cmd, m.tick())
	case form.OpenMsg:
		f := form.New(m.bodyCtx(), msg.Spec)
		m.form, m.showHelp = &f, false
		return m, nil
	case form.ClosedMsg:
		m.form = nil
		return m, nil
	case frame.NoticeMsg:
		m = m.setToast(termsafe.EscapeLine(msg.Text), toastInfo)
		return m, nil
	case frame.ShowLettersMsg:
		m = m.goTo(ScreenLetters)
		var cmd tea.Cmd
		m.list, cmd = m.list.Show(msg.Filter)
		return m, cmd
	case frame.ShowLetterMsg:
		m = m.goTo(ScreenDetail)
		var cmd tea.Cmd
		m.detail, cmd = m.detail.Open(msg.ID)
		return m, cmd
	case frame.RunRequestMsg:
		m = m.goTo(ScreenRun)
		var cmd tea.Cmd
		m.run, cmd = m.run.Start(msg.ID)
		return m, cmd
	case frame.BackMsg:
		return m.back()
	case frame.RefreshMsg:
		return m.refreshAll()
	case summary.LoadedMsg:
		if msg.Err == nil {
			m.list = m.list.SetQueues(msg.Queues())
		}
	case action.DoneMsg:
		if msg.Err == nil {
			m = m.setToast(msg.Notice(m.svc.Identity), toastInfo)
		}
	}
	if o, ok := msg.(frame.Outcome); ok {
		m = m.observe(o.Outcome())
	}
	var cmd tea.Cmd
	m.summary, cmd = m.summary.Update(msg)
	cmds = append(cmds, cmd)
	m.list, cmd = m.list.Update(msg)
	cmds = append(cmds, cmd)
	m.detail, cmd = m.detail.Update(msg)
	cmds = append(cmds, cmd)
	m.requests, cmd = m.requests.Update(msg)
	cmds = append(cmds, cmd)
	m.audit, cmd = m.audit.Update(msg)
	cmds = append(cmds, cmd)
	m.run, cmd = m.run.Update(msg)
	cmds = append(cmds, cmd)
	if f, ok := msg.(run.FinishedMsg); ok {
		m, cmd = m.runFinished(f)
		cmds = append(cmds, cmd)
	}
	return m, tea.Batch(cmds...)
}

// observe turns a service call's outcome into the banner: success clears an
// outage, a governance refusal or a missing object is a toast in its own
// words, anything else is an outage that the next tick retries.
func (m Model) observe(err error) Model {
	var refusal *replay.Refusal
	switch {
	case err == nil:
		m.outage = ""
	case errors.As(err, &refusal):
		m = m.setToast(termsafe.EscapeLine(refusal.Error()), toastRefusal)
	case errors.Is(err, deadletter.ErrNotFound):
		m = m.setToast(termsafe.EscapeLine(err.Error()), toastError)
	case errors.Is(err, context.Canceled):
	default:
		what := "error"
		var netErr net.Error
		if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connect") {
			what = "database unavailable"
		}
		retry := "press a key to retry"
		if m.refresh > 0 {
			retry = "retrying every " + phrase.Duration(m.refresh)
		}
		m.outage = fmt.Sprintf("%s: %s — showing the last data; %s", what, termsafe.EscapeLine(err.Error()), retry)
	}
	return m
}

func (m Model) setToast(text string, kind toastKind) Model {
	m.toast, m.toastKind, m.toastUntil = text, kind, m.now().Add(toastFor)
	return m
}

// refreshActive reloads the shown screen (or retries what failed on it).
func (m Model) refreshActive() (Model, tea.Cmd) {
	var cmd tea.Cmd
	switch m.active {
	case ScreenSummary:
		m.summary, cmd = m.summary.Refresh()
	case ScreenLetters:
		cmd = m.list.Refresh()
	case ScreenDetail:
		cmd = m.detail.Refresh()
	case ScreenRequests:
		m.requests, cmd = m.requests.Refresh()
	case ScreenAudit:
		cmd = m.audit.Refresh()
	}
	return m, cmd
}

// refreshAll reloads what may have changed after an action.
func (m Model) refreshAll() (Model, tea.Cmd) {
	var c1, c2 tea.Cmd
	m.summary, c1 = m.summary.Refresh()
	m.requests, c2 = m.requests.Refresh()
	return m, tea.Batch(c1, c2, m.list.Refresh(), m.detail.Refresh(), m.audit.Refresh())
}

// goTo shows screen s, remembering where we were. A toast belongs to the
// screen it was raised on (a refusal of its action), so it goes with it.
func (m Model) goTo(s Screen) Model {
	if s != m.active {
		m.toast, m.toastUntil = "", time.Time{}
		m.history = append(m.history, m.active)
		if len(m.history) > 20 {
			m.history = m.history[1:]
		}
	}
	m.active, m.showHelp = s, false
	return m
}

// switchTo shows screen s from a tab key and loads it if needed.
func (m Model) switchTo(s Screen) (Model, tea.Cmd) {
	m = m.goTo(s)
	return m.activate()
}

func (m Model) activate() (Model, tea.Cmd) {
	var cmd tea.Cmd
	switch m.active {
	case ScreenSummary:
		m.summary, cmd = m.summary.Refresh()
	case ScreenLetters:
		m.list, cmd = m.list.Activate()
	case ScreenRequests:
		m.requests, cmd = m.requests.Visit()
	case ScreenAudit:
		m.audit, cmd = m.audit.Activate()
	}
	return m, cmd
}

func (m Model) back() (Model, tea.Cmd) {
	prev := ScreenSummary
	if n := len(m.history); n > 0 {
		prev, m.history = m.history[n-1], m.history[:n-1]
	}
	if prev == m.active {
		prev = ScreenSummary
	}
	if prev != m.active {
		m.toast, m.toastUntil = "", time.Time{}
	}
	m.active = prev
	return m.activate()
}

func (m Model) capturing() bool {
	switch m.active {
	case ScreenLetters:
		return m.list.Capturing()
	}
	return false
}

func (m Model) quit() (Model, tea.Cmd) {
	m.run.Stop()
	return m, tea.Quit
}

func (m Model) handleKey(k tea.KeyMsg) (Model, tea.Cmd) {
	if m.quitting != quitNone {
		return m.handleQuitKey(k)
	}
	if key.Matches(k, m.keys.Interrupt) {
		return m.askQuit(true)
	}
	if m.form != nil {
		f, cmd := m.form.Update(k)
		m.form = &f
		return m, cmd
	}
	if m.showHelp {
		if key.Matches(k, m.keys.Quit) {
			return m.askQuit(false)
		}
		m.showHelp = false
		return m, nil
	}
	if !m.capturing() {
		g := m.keys
		switch {
		case key.Matches(k, g.Quit):
			return m.askQuit(false)
		case key.Matches(k, g.Help):
			m.showHelp = true
			return m, nil
		case key.Matches(k, g.Summary):
			return m.switchTo(ScreenSummary)
		case key.Matches(k, g.Letters):
			return m.switchTo(ScreenLetters)
		case key.Matches(k, g.Requests):
			return m.switchTo(ScreenRequests)
		case key.Matches(k, g.Audit):
			return m.switchTo(ScreenAudit)
		case key.Matches(k, g.Run):
			return m.switchTo(ScreenRun)
		case key.Matches(k, g.Next), key.Matches(k, g.Prev):
			i := int(m.tab())
			if key.Matches(k, g.Next) {
				i = (i + 1) % len(tabs)
			} else {
				i = (i + len(tabs) - 1) % len(tabs)
			}
			return m.switchTo(tabs[i].screen)
		}
	}
	var cmd tea.Cmd
	switch m.active {
	case ScreenSummary:
		m.summary, cmd = m.summary.Update(k)
	case ScreenLetters:
		m.list, cmd = m.list.Update(k)
	case ScreenDetail:
		m.detail, cmd = m.detail.Update(k)
	case ScreenRequests:
		m.requests, cmd = m.requests.Update(k)
	case ScreenAudit:
		m.audit, cmd = m.audit.Update(k)
	case ScreenRun:
		m.run, cmd = m.run.Update(k)
	}
	return m, cmd
}

// tab is the tab the active screen is under.
func (m Model) tab() Screen {
	if m.active == ScreenDetail {
		return ScreenLetters
	}
	return m.active
}

func (m Model) screenKeys() help.KeyMap {
	if m.quitting != quitNone {
		return m.quitKeys
	}
	if m.form != nil {
		return m.form.Keys()
	}
	switch m.active {
	case ScreenSummary:
		return m.summary.Keys()
	case ScreenLetters:
		return m.list.Keys()
	case ScreenDetail:
		return m.detail.Keys()
	case ScreenRequests:
		return m.requests.Keys()
	case ScreenAudit:
		return m.audit.Keys()
	case ScreenRun:
		return m.run.Keys()
	}
	return nil
}

// View draws the header, the banner, the shown screen (or form, or help)
// and the help line, in exactly the terminal's size.
func (m Model) View() string {
	th := m.theme
	var parts []string
	for _, t := range tabs {
		name := fmt.Sprintf("%d %s", int(t.screen)+1, t.name)
		if t.screen == ScreenLetters && m.active == ScreenDetail && m.detail.ID() != 0 {
			name += fmt.Sprintf(" › %d", m.detail.ID())
		}
		if t.screen == m.tab() {
			parts = append(parts, th.TabOn.Render("["+name+"]"))
		} else {
			parts = append(parts, th.Tab.Render(" "+name+" "))
		}
	}
	left := strings.Join(parts, " ")
	header := left
	// Who the window acts as matters more than the product's name: a
	// narrow terminal drops the name first, then the roles.
	for _, right := range m.whoAmI() {
		if gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right); gap >= 1 {
			header += strings.Repeat(" ", gap) + th.Dim.Render(right)
			break
		}
	}
	lines := []string{frame.Pad(header, m.width)}

	for _, l := range m.bannerLines() {
		style := th.Notice
		switch {
		case m.outage != "":
			style = th.Error
		case m.toastKind != toastInfo:
			style = th.Warn
		}
		lines = append(lines, style.Render(frame.Pad(l, m.width)))
	}

	var body string
	switch {
	case m.quitting != quitNone:
		body = m.quitView()
	case m.form != nil:
		body = m.form.View()
	case m.showHelp:
		h := m.help
		h.ShowAll = true
		body = th.Title.Render("Keys (any key closes)") + "\n\n" + h.View(m.helpKeys())
	default:
		switch m.active {
		case ScreenSummary:
			body = m.summary.View()
		case ScreenLetters:
			body = m.list.View()
		case ScreenDetail:
			body = m.detail.View()
		case ScreenRequests:
			body = m.requests.View()
		case ScreenAudit:
			body = m.audit.View()
		case ScreenRun:
			body = m.run.View()
		}
	}
	lines = append(lines, frame.Fit(body, m.width, m.bodyHeight))
	lines = append(lines, frame.Pad(m.help.View(m.helpKeys()), m.width))
	return strings.Join(lines, "\n")
}

// whoAmI is the header's right side, longest first: the actor, the login
// when it differs from the actor's label, and the login's roles.
func (m Model) whoAmI() []string {
	id := m.svc.Identity
	who := termsafe.EscapeLine(m.svc.Actor)
	switch {
	case who == "":
		who = termsafe.EscapeLine(id.Login)
	case id.Known() && id.Login != m.svc.Actor:
		who += " (login " + termsafe.EscapeLine(id.Login) + ")"
	}
	if who == "" {
		return []string{"expiryctl"}
	}
	full := who
	if id.Known() {
		full += " · " + id.Standing()
	}
	return []string{"expiryctl · " + full, full, who}
}

// stopWait bounds how long Run waits for a run still going to take its stop
// path (the runner drains its confirms for up to 30 s).
const stopWait = 45 * time.Second

// Run shows m on the terminal behind in and out, in the alternate screen,
// until the user quits or ctx ends; the terminal is restored either way.
// A run still going (ctx ended, or a second ctrl+c) is stopped by the
// runner's stop path, and Run waits for it, bounded, so that its letters
// not sent are back to pending before the process ends. ctrl+c returns
// ErrInterrupted.
func Run(ctx context.Context, m Model, in io.Reader, out io.Writer) error {
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	final, err := p.Run()
	fm, ok := final.(Model)
	if !ok {
		fm = m
	}
	if id := fm.run.RunningID(); id != 0 {
		if stopped, stopErr := fm.run.StopAndWait(stopWait); stopped {
			fm.exitNote = stopNote(id, stopErr)
		} else {
			fm.exitNote = runStillGoing(id)
		}
	}
	if fm.notes != nil && fm.exitNote != "" {
		fmt.Fprintln(fm.notes, fm.exitNote)
	}
	switch {
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return ctx.Err()
	case err == nil && fm.interrupted:
		return ErrInterrupted
	}
	return err
}
