package commands

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

func columns(n int) func(io.Writer) (int, int, bool) {
	return func(io.Writer) (int, int, bool) { return n, 24, true }
}

func TestFitLine(t *testing.T) {
	t.Parallel()
	long := "replay 7: 40/300 done (40 confirmed, 0 skipped, 0 failed), 3 in flight, 19.8/s, ETA 13s · lowered to 10.0/s: reservation-expiry ready 120 → 340, growing"
	tests := []struct {
		line  string
		width int
		want  string
	}{
		{"short", 80, "short"},
		{strings.Repeat("x", 79), 80, strings.Repeat("x", 79)},
		{strings.Repeat("x", 80), 80, strings.Repeat("x", 78) + "…"},
		{long, 80, long[:78] + "…"},
		{"a — b → c", 6, "a — …"}, // cells, not bytes
		{long, 1, long},           // no width to fit: left whole
	}
	for _, tt := range tests {
		got := fitLine(tt.line, tt.width)
		if got != tt.want {
			t.Errorf("fitLine(%q, %d) = %q, want %q", tt.line, tt.width, got, tt.want)
		}
		if tt.width > 1 && ansi.StringWidth(got) > tt.width-1 {
			t.Errorf("fitLine(%q, %d) is %d cells wide", tt.line, tt.width, ansi.StringWidth(got))
		}
	}
}

// The progress line rewrites itself in place, cut to the terminal's
// width, read at each update; with no width to read it is left whole.
func TestProgressLine(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	width := 20
	p := &progressLine{w: &b, size: func(io.Writer) (int, int, bool) { return width, 24, true }}
	p.show("ingesting reservation-expiry.dlq: 10 stored")
	width = 30
	p.show("ingesting reservation-expiry.dlq: 20 stored")
	p.clear()
	want := "\r\x1b[Kingesting reservat…" + "\r\x1b[Kingesting reservation-expiry…" + "\r\x1b[K"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	newProgressLine(&b).show(strings.Repeat("x", 300))
	if b.String() != "\r\x1b[K"+strings.Repeat("x", 300) {
		t.Errorf("not a terminal: wrote %q", b.String())
	}
}

// What changes during the canary's wait, its countdown and the ETA, comes
// first, so that it shows at 80 columns.
func TestRunProgressLineDuringTheCanaryWait(t *testing.T) {
	t.Parallel()
	p := replay.Progress{RequestID: 1234, Kind: replay.KindReplay, Phase: "canary-wait", Total: 5000, Done: 50, Confirmed: 50,
		Rate: 19.8, ETA: 5*time.Minute + 12*time.Second, CanaryLeft: 55 * time.Second, PaceWhy: "fixed ceiling 20/s: no live view to pace by"}
	got := fitLine(runProgressLine(p), 80)
	if want := "replay 1234: canary out, watching 55s more for re-dead letters, ETA 5m12s · 50…"; got != want {
		t.Errorf("at 80 columns: %q, want %q", got, want)
	}
}

// `replay run` on a terminal keeps its progress on one line of the
// terminal's width: every update starts with a carriage return and none
// is wider than the terminal, so none wraps onto a line of its own.
func TestReplayRunProgressFitsTheTerminal(t *testing.T) {
	t.Parallel()
	f, _, errOut := testFactory(t)
	f.IO.StdoutTTY, f.IO.StderrTTY = true, true
	step := replay.Progress{RequestID: 7, Kind: replay.KindReplay, Phase: "replay", Total: 100, Done: 16, Confirmed: 16, Rate: 4,
		ETA: 21 * time.Second, PaceWhy: "fixed ceiling 4/s: no live view to pace by"}
	wait := step
	wait.Phase, wait.CanaryLeft = "canary-wait", 25*time.Second
	runner := &fakes.Runner{Result: replay.RunResult{RequestID: 7, Kind: replay.KindReplay, Status: replay.StatusCompleted},
		Steps: []replay.Progress{wait, step, step, {RequestID: 7, Kind: replay.KindReplay, Phase: "stopping"}}}
	err := runCmd(NewCmdReplayRun(f, func(ctx context.Context, o *ReplayRunOptions) error {
		o.Runner = serve[service.Runner](runner)
		o.progress = &progressLine{w: o.IO.ErrOut, size: columns(80)}
		return replayRunRun(ctx, o)
	}), "7")
	if err != nil {
		t.Fatal(err)
	}
	progress, rest, _ := strings.Cut(errOut.String(), "\n")
	updates := strings.Split(progress, "\r\x1b[K")
	if updates[0] != "" || len(updates) != 5 {
		t.Fatalf("stderr %q: want 3 updates and a clear, each after a carriage return", errOut)
	}
	for _, u := range updates[1:4] {
		if w := ansi.StringWidth(u); w > 79 || !strings.HasPrefix(u, "replay 7: ") {
			t.Errorf("an update %d cells wide at 80 columns: %q", w, u)
		}
	}
	if !strings.Contains(updates[1], "watching 25s more") || !strings.Contains(updates[1], "ETA 21s") {
		t.Errorf("the canary wait's update: %q", updates[1])
	}
	if !strings.HasPrefix(updates[4], "replay request 7 completed") || rest != "replay request 7: its approval is unsigned, and this runner does not require signatures (--keyring)\n" {
		t.Errorf("after the progress: %q then %q", updates[4], rest)
	}
}

// `dlq ingest` on a terminal cuts its progress line to the terminal too.
func TestDLQIngestProgressFitsTheTerminal(t *testing.T) {
	t.Parallel()
	f, _, errOut := testFactory(t)
	f.IO.StderrTTY = true
	queue := "payments-eu-west-1.reservation-expiry.dead-letter.quorum.v2"
	ingester := &fakes.Ingester{Stats: deadletter.IngestStats{Stored: 12000, Duplicates: 3, Elapsed: time.Second}}
	err := runCmd(NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
		o.Ingester = serve[service.Ingester](ingester)
		o.Source = func(string, int) (service.DLQSource, error) { return fakes.NewDLQSource(), nil }
		o.progress = &progressLine{w: o.IO.ErrOut, size: columns(60)}
		return dlqIngestRun(ctx, o)
	}), "--queue", queue)
	if err != nil {
		t.Fatal(err)
	}
	want := "\r\x1b[K" + fitLine("ingesting "+queue+": 12000 stored, 3 duplicates, 12000 msgs/s", 60) + "\r\x1b[K"
	if !strings.Contains(errOut.String(), want) || ansi.StringWidth(fitLine("ingesting "+queue, 60)) != 59 {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
}

// TestProgressLineSaysAboveItself: a message from another goroutine (a
// signed checkpoint, a reconnect) gets a line of its own, and the progress
// line comes back under it; with no progress line shown, only the message
// is written.
func TestProgressLineSaysAboveItself(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &progressLine{w: &out, size: columns(80)}
	p.say("before any progress")
	p.show("ingesting q: 40 stored")
	p.say("signed audit checkpoint of 12 rows")
	p.clear()
	p.say("after the progress")
	want := "before any progress\n" +
		"\r\x1b[Kingesting q: 40 stored" +
		"\r\x1b[Ksigned audit checkpoint of 12 rows\ningesting q: 40 stored" +
		"\r\x1b[K" +
		"after the progress\n"
	if out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
}
