package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
	gologfmt "github.com/go-logfmt/logfmt"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/store"
)

// The intervals of --watch. Updates less than a second apart would cost the
// database a query each and show a person nothing they could act on.
const (
	defaultWatchInterval = 5 * time.Second
	minWatchInterval     = time.Second
)

// Terminal controls of a redraw in place: the first frame clears the
// screen; each later one goes back to the top and overwrites it line by
// line, erasing what is left below, so the scrollback keeps one copy and
// nothing flickers.
const (
	termClear      = "\x1b[2J"
	termHome       = "\x1b[H"
	termEraseLine  = "\x1b[2K"
	termEraseBelow = "\x1b[J"
)

// watchFlag is the value of --watch: off, when the command runs once, or the
// interval between updates. It carries what a watch takes from the Factory
// (the clock, the environment, the redaction of errors), so that a command
// gains one option for it.
type watchFlag struct {
	interval time.Duration

	now    func() time.Time
	getenv func(string) string
	redact func(string) string
	// ticks returns a channel that delivers a time every d, and its stop.
	ticks func(d time.Duration) (<-chan time.Time, func())
	// size returns the width and height of the terminal w is, ok false
	// when it cannot tell.
	size func(w io.Writer) (width, height int, ok bool)
}

// addWatchFlag registers --watch on cmd.
func addWatchFlag(cmd *cobra.Command, f *Factory) *watchFlag {
	w := &watchFlag{now: f.Now, getenv: f.Getenv, ticks: tickEvery, size: terminalSize,
		redact: func(s string) string {
			return dsn.RedactTextFor(s, append([]string{f.DatabaseURL()}, f.AMQPURLs()...)...)
		}}
	// The empty back-quoted name keeps pflag from printing a placeholder
	// after the flag: its interval follows an equals sign (--watch[=5s]).
	cmd.Flags().Var(w, "watch", "``update every 5s until Ctrl-C, or every --watch=INTERVAL (at least 1s): "+
		"in place on a terminal; piped, one line per update, or with -o json one {\"at\",\"data\"} object per line")
	cmd.Flags().Lookup("watch").NoOptDefVal = phrase.Duration(defaultWatchInterval)
	// With an optional value, `--watch 10s` leaves 10s as an argument:
	// say so rather than call it an unknown command or a bad id.
	validate := cmd.Args
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		for _, a := range args {
			if d, err := time.ParseDuration(a); w.on() && err == nil && d != 0 {
				return flagErrorf("--watch takes its interval after an equals sign: --watch=%s", a)
			}
		}
		if validate == nil {
			return nil
		}
		return validate(cmd, args)
	}
	return w
}

func (w *watchFlag) String() string {
	if w.interval == 0 {
		return ""
	}
	return phrase.Duration(w.interval)
}

func (w *watchFlag) Type() string { return "interval" }

func (w *watchFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("use an interval with its unit, such as --watch=5s, --watch=30s or --watch=1m")
	}
	if d < minWatchInterval {
		return fmt.Errorf("%s is too short: use an interval of at least %s, such as --watch=5s", v, phrase.Duration(minWatchInterval))
	}
	w.interval = d
	return nil
}

// on reports whether the command watches rather than runs once.
func (w *watchFlag) on() bool { return w != nil && w.interval > 0 }

func tickEvery(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func terminalSize(w io.Writer) (width, height int, ok bool) {
	f, isFile := w.(interface{ Fd() uintptr })
	if !isFile {
		return 0, 0, false
	}
	width, height, err := term.GetSize(f.Fd())
	return width, height, err == nil && width > 0 && height > 0
}

// watchUpdate is one update of a watch, as a command's draw function gets
// it.
type watchUpdate struct {
	// IO are the streams to draw the update on. What is written to them is
	// shown only once draw returned without an error, so that a failed
	// read leaves the last good frame on the screen.
	IO *IOStreams
	// Redraw is false for the first update, whose read goes through the
	// audited service, and true for every later one, whose read must not:
	// a watch is audited once, however long it runs.
	Redraw bool
	// OneLine asks for the command's one-line form, in Line, instead of
	// its usual output: the watch's output is piped (without -o json).
	OneLine bool
	// Line is the one-line form, built with a logfmt; the watch puts the
	// time of the update in front of it.
	Line string
}

// watchMode is how a watch shows its updates.
type watchMode int

const (
	// watchRedraw redraws the command's usual output in place on a
	// terminal, under a header with the time of the update.
	watchRedraw watchMode = iota
	// watchLines writes one line per update: piped, or on a terminal that
	// cannot move its cursor (TERM=dumb).
	watchLines
	// watchJSON writes one JSON object per line and update,
	// {"at": TIME, "data": DOCUMENT}, DOCUMENT being what -o json prints
	// without --watch.
	watchJSON
)

// run draws an update now and one every interval until ctx is done (Ctrl-C
// or SIGTERM), which ends the watch without an error: stopping a watch is
// how it is meant to end. title names what is watched in the header.
//
// The first update must succeed: a watch that never read anything ends
// with the read's error and exit code. After that, an update that fails is
// shown with the time it failed, and the watch goes on, since a database
// that restarts or fails over at 3 a.m. comes back; a refusal, a missing
// request or a schema that does not match stay so until someone acts, and
// end the watch with their exit code (see watchEnds).
func (w *watchFlag) run(ctx context.Context, streams *IOStreams, title string, jsonOutput bool, draw func(context.Context, *watchUpdate) error) error {
	s := &watchScreen{io: streams, title: title, interval: w.interval, redact: w.redact, size: w.size, mode: watchRedraw}
	switch {
	case jsonOutput:
		s.mode = watchJSON
	case !streams.StdoutTTY || (w.getenv != nil && w.getenv("TERM") == "dumb"):
		s.mode = watchLines
	}
	ticks, stop := w.ticks(w.interval)
	defer stop()
	// The watch's one audit row, written by its first read, says it was a
	// watch and how often it redraws.
	ctx = audit.WithInvocation(ctx, map[string]any{"watch": map[string]any{"interval": phrase.Duration(w.interval)}})
	for first := true; ; first = false {
		at := w.now()
		frame := &bytes.Buffer{}
		u := &watchUpdate{IO: s.frameStreams(frame), Redraw: !first, OneLine: s.mode == watchLines}
		err := draw(ctx, u)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && first:
			return err
		case err != nil:
			if ends, final := watchEnds(err); ends {
				return final
			}
			if err := s.showFailure(at, err); err != nil {
				return err
			}
		default:
			if err := s.show(at, frame.Bytes(), u.Line); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

// watchEnds reports whether a failed update ends the watch, and the error
// it ends with. What a person must act on ends it: a refusal (PostgreSQL's
// own permission denied included, as the refusal it is), a request that is
// not there, a schema that does not match, and any other error the server
// answered with that asking again would not change. A lost or refused
// connection, a server shutting down, restarting or short of resources, a
// cancelled statement, a deadlock or a serialization failure pass.
func watchEnds(err error) (bool, error) {
	err = store.AsRefusal(err)
	if code := ExitCode(err); code != ExitError && code != ExitUnavailable {
		return true, err
	}
	return !store.Transient(err), err
}

// watchScreen shows a watch's updates on its streams.
type watchScreen struct {
	io       *IOStreams
	title    string
	interval time.Duration
	redact   func(string) string
	size     func(io.Writer) (width, height int, ok bool)
	mode     watchMode

	drawn  bool      // a frame is on the screen
	last   []byte    // the last good frame, redrawn under a failure
	lastAt time.Time // when it was read
}

// frameStreams are the streams an update draws on: its output goes to
// frame, and so, on a terminal, do its hints (such as "no requests"), which
// belong in the frame. Piped, the hints of a command's usual output are
// not written at all: the one-line form replaces that output.
func (s *watchScreen) frameStreams(frame *bytes.Buffer) *IOStreams {
	streams := *s.io
	streams.Out = frame
	switch s.mode {
	case watchRedraw:
		streams.ErrOut = frame
	case watchLines:
		streams.ErrOut = io.Discard
	}
	return &streams
}

func (s *watchScreen) show(at time.Time, frame []byte, line string) error {
	switch s.mode {
	case watchLines:
		_, err := fmt.Fprintf(s.io.Out, "%s %s\n", at.UTC().Format(time.RFC3339), line)
		return err
	case watchJSON:
		doc := bytes.TrimSpace(frame)
		if len(doc) == 0 {
			doc = []byte("null")
		}
		out, err := json.Marshal(struct {
			At   time.Time       `json:"at"`
			Data json.RawMessage `json:"data"`
		}{at.UTC(), doc})
		if err != nil {
			return err
		}
		_, err = s.io.Out.Write(append(out, '\n'))
		return err
	}
	s.last, s.lastAt = frame, at
	return s.redraw(s.header(at), "", frame)
}

// showFailure shows why an update failed: on stderr when piped, with its
// time (stdout carries updates only, so that what reads it need not tell
// them from failures); on a terminal, in the frame, above the last good
// update.
func (s *watchScreen) showFailure(at time.Time, err error) error {
	msg := termsafe.EscapeLine(s.redact(err.Error()))
	retry := "retrying every " + phrase.Duration(s.interval)
	if s.mode != watchRedraw {
		_, werr := fmt.Fprintf(s.io.ErrOut, "%s error: %s (%s)\n", at.UTC().Format(time.RFC3339), msg, retry)
		return werr
	}
	// A watch starts with a good update, so there is always one to show.
	status := fmt.Sprintf("%s: could not update: %s (%s); below, the update of %s", clock(at), msg, retry, clock(s.lastAt))
	return s.redraw(s.header(s.lastAt), styles(s.io).warn.Render(status), s.last)
}

// header is the first line of a redrawn frame: what is watched, how often,
// the time of the last good update, and how to stop.
func (s *watchScreen) header(updated time.Time) string {
	st := styles(s.io)
	return st.header.Render("expiryctl "+s.title) +
		st.dim.Render(" · every "+phrase.Duration(s.interval)+" · updated "+clock(updated)+" · Ctrl-C to stop")
}

// redraw writes header, status (when there is one) and frame over what the
// terminal shows, in one write.
func (s *watchScreen) redraw(header, status string, frame []byte) error {
	lines := []string{header}
	if status != "" {
		lines = append(lines, status)
	}
	lines = append(lines, "")
	if body := strings.TrimRight(string(frame), "\n"); body != "" {
		lines = append(lines, strings.Split(body, "\n")...)
	}
	var b strings.Builder
	if !s.drawn {
		b.WriteString(termClear)
	}
	b.WriteString(termHome)
	for _, l := range s.fit(lines) {
		b.WriteString(termEraseLine)
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString(termEraseBelow)
	s.drawn = true
	_, err := io.WriteString(s.io.Out, b.String())
	return err
}

// fit cuts a frame to the terminal so that drawing it never scrolls: a
// frame taller than the screen would push part of itself into the
// scrollback at every redraw, and a line wider than the screen would wrap
// onto the rows below. The last row stays free for the cursor.
func (s *watchScreen) fit(lines []string) []string {
	width, height, ok := s.size(s.io.Out)
	if !ok {
		return lines
	}
	if height >= 3 && len(lines) > height-1 {
		keep := height - 2
		more := fmt.Sprintf("… %d more lines: a taller terminal shows them", len(lines)-keep)
		lines = append(lines[:keep:keep], styles(s.io).dim.Render(more))
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, width, "…")
	}
	return lines
}

// clock is the time of an update as a header shows it.
func clock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// logfmt builds the one-line form of an update with go-logfmt: key=value
// pairs, a value quoted when logfmt needs it. Each value is escaped for a
// terminal first (termsafe.EscapeLine), since logfmt leaves C1 controls and
// bidirectional marks as they are: stored text can neither break the line
// nor drive a terminal, and grep and awk can take it apart.
type logfmt struct {
	b   strings.Builder
	enc *gologfmt.Encoder
}

func (l *logfmt) add(key string, value any) *logfmt {
	if l.enc == nil {
		l.enc = gologfmt.NewEncoder(&l.b)
	}
	// Keys are the command's own constants: an error is a bad key, a bug
	// the tests of each line catch.
	_ = l.enc.EncodeKeyval(key, termsafe.EscapeLine(fmt.Sprint(value)))
	return l
}

func (l *logfmt) String() string { return l.b.String() }

// watchServices hands each update of a watch the service it reads through:
// the audited one for the first update, the unaudited one for the redraws,
// built once and kept, since building one checks the schema.
type watchServices[T any] struct {
	audited, unaudited func(context.Context) (T, error)
	redraws            T
	built              bool
}

func (w *watchServices[T]) get(ctx context.Context, redraw bool) (T, error) {
	if !redraw {
		return w.audited(ctx)
	}
	if !w.built {
		svc, err := w.unaudited(ctx)
		if err != nil {
			return svc, err
		}
		w.redraws, w.built = svc, true
	}
	return w.redraws, nil
}
