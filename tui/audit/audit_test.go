package audit_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/tui/audit"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/internal/tuitest"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

func update(m audit.Model, msg tea.Msg) (audit.Model, tea.Cmd) { return m.Update(msg) }

func setup(t *testing.T, trail *tuitest.Audit) audit.Model {
	t.Helper()
	svc := tuitest.Services(fakes.Letters(1), fakes.NewRequests("alice"))
	svc.Audit = trail
	m, first := audit.New(tuitest.Context(80, 21), svc).Activate()
	m, _ = tuitest.Drive(t, m, update, first)
	return m
}

func TestFilterAndPaging(t *testing.T) {
	t.Parallel()
	m := setup(t, tuitest.NewAudit(1000))
	for range 30 {
		m, _ = tuitest.Drive(t, m, update, nil, tuitest.Key("pgdown"))
	}
	if v := m.View(); !strings.Contains(v, "row 481 of 6") {
		t.Errorf("after 30 pages down:\n%s", v)
	}
	// The filter form, filled in and submitted.
	_, msgs := tuitest.Drive(t, m, update, nil, tuitest.Key("/"))
	open, ok := msgs[len(msgs)-1].(form.OpenMsg)
	if !ok {
		t.Fatalf("/ gave %#v, want the filter form", msgs[len(msgs)-1])
	}
	m, _ = tuitest.Drive(t, m, update, open.Spec.Submit(form.Values{"actor": "bob", "action": "replay.approve"}))
	if got := m.Filter(); got != (backend.AuditFilter{Actor: "bob", Action: "replay.approve"}) {
		t.Errorf("filter = %+v", got)
	}
	v := m.View()
	if !strings.Contains(v, "actor=bob action=replay.approve") || strings.Contains(v, "alice") || !strings.Contains(v, "row 1 of 100") {
		t.Errorf("filtered view:\n%s", v)
	}
	m, _ = tuitest.Drive(t, m, update, nil, tuitest.Key("x"))
	if m.Filter() != (backend.AuditFilter{}) {
		t.Errorf("x left filter %+v", m.Filter())
	}
}

func TestBrokenChain(t *testing.T) {
	t.Parallel()
	trail := tuitest.NewAudit(10)
	trail.Check = backend.AuditCheck{Rows: 6, BrokenAt: 7, Problem: "hash does not match the row \x1b[2J"}
	m := setup(t, trail)
	v := m.View()
	tuitest.AssertSafe(t, v)
	if !strings.Contains(v, `chain: BROKEN at seq 7: hash does not match the row \x1b[2J`) {
		t.Errorf("view:\n%s", v)
	}
}

func TestNotWired(t *testing.T) {
	t.Parallel()
	m, _ := audit.New(tuitest.Context(80, 21), tuitest.Services(fakes.Letters(1), fakes.NewRequests("alice"))).Activate()
	if !strings.Contains(m.View(), "expiryctl audit list") {
		t.Errorf("view:\n%s", m.View())
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"120x40", 120, 40}, {"200x50", 200, 50}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			svc := tuitest.Services(fakes.Letters(1), fakes.NewRequests("alice"))
			svc.Audit = tuitest.NewAudit(300)
			m, first := audit.New(tuitest.Context(size.w, size.h), svc).Activate()
			tm := teatest.NewTestModel(t, tuitest.Wrap(m, first), teatest.WithInitialTermSize(size.w, size.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
				return bytes.Contains(b, []byte("300 rows verified")) && bytes.Contains(b, []byte("of 100+"))
			},
				teatest.WithDuration(5*time.Second))
			tm.Send(tuitest.Key("down"))
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			view := tm.FinalModel(t).View()
			tuitest.AssertFits(t, view, size.w, size.h)
			if !rfc3339.MatchString(view) {
				t.Errorf("no time in RFC 3339 UTC, as `audit list` prints it:\n%s", view)
			}
			golden.RequireEqual(t, []byte(view))
		})
	}
}

// rfc3339 is a whole UTC time, year and zone included.
var rfc3339 = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\b`)
