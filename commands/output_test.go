package commands

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// terminalStreams are streams that say they are a terminal of the given
// size, writing to a buffer.
func terminalStreams(width, height int) (*IOStreams, *bytes.Buffer) {
	out := &bytes.Buffer{}
	return &IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &bytes.Buffer{}, StdoutTTY: true,
		TerminalSize: func() (int, int, bool) { return width, height, true }}, out
}

// onTerminal makes f's streams a terminal of the given size.
func onTerminal(f *Factory, width, height int) {
	f.IO.StdoutTTY = true
	f.IO.TerminalSize = func() (int, int, bool) { return width, height, true }
}

// assertFits fails unless every line of out is at most width columns and
// each of rows (the first cell of a row) is on a line of its own that
// still shows each of its whole cells.
func assertFits(t *testing.T, out string, width int, whole ...[]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("a line is %d columns on a %d-column terminal, so it wraps:\n%s", w, width, l)
		}
	}
	for _, cells := range whole {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, cells[0]+" ") {
				found = true
				for _, c := range cells[1:] {
					if !strings.Contains(l, " "+c) {
						t.Errorf("row %s lost its cell %q on a %d-column terminal:\n%s", cells[0], c, width, out)
					}
				}
			}
		}
		if !found {
			t.Errorf("no row starts with %q:\n%s", cells[0], out)
		}
	}
}

func TestTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("connection reset by peer while expiring the hold ", 4)
	build := func(streams *IOStreams) *table {
		tb := newTable(streams, "ID", "STATUS", "ERROR", "QUEUE", "STATE").truncatable("ERROR", "QUEUE")
		tb.addRow("41", "dead", long, "reservation-expiry.dlq", "pending")
		tb.addRow("42", "in_request", "timeout", "reservation-expiry.dlq", "confirmed")
		return tb
	}
	for _, width := range []int{80, 120} {
		streams, out := terminalStreams(width, 40)
		if err := build(streams).render(); err != nil {
			t.Fatal(err)
		}
		// The free-text column gives up its width: the ids, states and
		// the columns after it stay whole.
		assertFits(t, out.String(), width, []string{"41", "dead", "pending"}, []string{"42", "in_request", "timeout", "confirmed"})
		if !strings.Contains(out.String(), "…") {
			t.Errorf("at %d columns the long error is not cut with an ellipsis:\n%s", width, out)
		}
	}
	t.Run("the widest truncatable column gives first", func(t *testing.T) {
		t.Parallel()
		streams, out := terminalStreams(80, 40)
		if err := build(streams).render(); err != nil {
			t.Fatal(err)
		}
		// At 80 columns the error alone can give what is needed: the
		// queue, narrower, stays whole.
		if !strings.Contains(out.String(), "reservation-expiry.dlq") {
			t.Errorf("the queue was cut while the error was wider:\n%s", out)
		}
	})
	t.Run("a row too wide even then loses its free text, never wraps", func(t *testing.T) {
		t.Parallel()
		streams, out := terminalStreams(30, 40)
		if err := build(streams).render(); err != nil {
			t.Fatal(err)
		}
		assertFits(t, out.String(), 30, []string{"41", "dead", "pending"})
		// The free-text columns are left out, headers and all.
		if header, _, _ := strings.Cut(out.String(), "\n"); strings.Contains(header, "ERROR") || !strings.Contains(header, "STATE") {
			t.Errorf("header at 30 columns: %q", header)
		}
	})
	t.Run("a wide enough terminal shows every cell whole", func(t *testing.T) {
		t.Parallel()
		streams, out := terminalStreams(400, 40)
		if err := build(streams).render(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), strings.TrimSpace(long)) || strings.Contains(out.String(), "…") {
			t.Errorf("at 400 columns a cell was cut:\n%s", out)
		}
	})
	t.Run("piped, the cells are whole and tab-separated", func(t *testing.T) {
		t.Parallel()
		out := &bytes.Buffer{}
		streams := &IOStreams{Out: out, TerminalSize: func() (int, int, bool) { return 80, 40, true }}
		if err := build(streams).render(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "\t"+long+"\t") {
			t.Errorf("piped output cut a cell:\n%s", out)
		}
	})
	t.Run("wide characters count as two columns", func(t *testing.T) {
		t.Parallel()
		streams, out := terminalStreams(40, 40)
		tb := newTable(streams, "ID", "WHY", "STATE").truncatable("WHY")
		tb.addRow("7", strings.Repeat("予約", 20), "running")
		if err := tb.render(); err != nil {
			t.Fatal(err)
		}
		assertFits(t, out.String(), 40, []string{"7", "running"})
	})
}

func TestTableTruncatableNamesItsColumns(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"NOPE"`) {
			t.Errorf("an unknown column = %v, want a panic naming it", r)
		}
	}()
	newTable(&IOStreams{}, "ID", "WHY").truncatable("NOPE")
}
