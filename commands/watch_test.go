package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// watchClock is the clock and ticker of a watch under test. Each update
// reads the time once, at its start: the clock answers testFactory's now
// plus one interval per update and first calls before(i) for update i (0
// is the first), so that a test changes the fakes between two updates
// without racing either. The ticker delivers the ticks of updates-1 more
// updates, then cancels the watch as Ctrl-C does.
type watchClock struct {
	updates int
	before  func(i int)
	cancel  context.CancelFunc

	mu       sync.Mutex
	interval time.Duration // what the watch asked the ticker for
	calls    int
}

func (c *watchClock) install(w *watchFlag) {
	w.now, w.ticks = c.now, c.tick
}

func (c *watchClock) now() time.Time {
	c.mu.Lock()
	i, interval := c.calls, c.interval
	c.calls++
	c.mu.Unlock()
	if c.before != nil {
		c.before(i)
	}
	return time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).Add(time.Duration(i) * interval)
}

func (c *watchClock) tick(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	c.interval = d
	c.mu.Unlock()
	ticks, stopped := make(chan time.Time), make(chan struct{})
	go func() {
		for range c.updates - 1 {
			select {
			case ticks <- time.Time{}:
			case <-stopped:
				return
			}
		}
		c.cancel()
	}()
	return ticks, func() { close(stopped) }
}

// watchRun runs the command build makes with args, as a watch of updates
// updates stopped by Ctrl-C; build installs the clock in its runF.
func watchRun(t *testing.T, f *Factory, updates int, before func(int), build func(*watchClock) *cobra.Command, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clock := &watchClock{updates: updates, before: before, cancel: cancel}
	done := make(chan error, 1)
	go func() { done <- runCmdContext(ctx, build(clock), args...) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch did not stop on Ctrl-C")
		return nil
	}
}

// summaryWatch builds `dlq summary` over reads of archive.
func summaryWatch(f *Factory, reads *fakes.ArchiveReads) func(*watchClock) *cobra.Command {
	return func(clock *watchClock) *cobra.Command {
		return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive, o.UnauditedArchive, o.HoldsGap = reads.Audited, reads.Unaudited, nil
			o.LiveQueues = func(context.Context) (service.LiveQueues, error) {
				return &fakes.LiveQueues{Report: fakes.TopologyReport(o.WorkQueue)}, nil
			}
			clock.install(o.Watch)
			return dlqSummaryRun(ctx, o)
		})
	}
}

// frames splits what a watch wrote to a terminal into its frames, as the
// text they show.
func frames(t *testing.T, out string) []string {
	t.Helper()
	if !strings.HasPrefix(out, termClear+termHome) || strings.Count(out, termClear) != 1 {
		t.Fatalf("a watch clears the screen once, before its first frame:\n%q", out)
	}
	var shown []string
	for _, f := range strings.Split(strings.TrimPrefix(out, termClear), termHome)[1:] {
		if !strings.HasSuffix(f, termEraseBelow) {
			t.Fatalf("a frame ends by erasing what is below it:\n%q", f)
		}
		shown = append(shown, strings.ReplaceAll(strings.TrimSuffix(f, termEraseBelow), termEraseLine, ""))
	}
	return shown
}

var anyEscape = regexp.MustCompile("\x1b")

func TestWatchFlag(t *testing.T) {
	t.Parallel()
	commands := map[string]func(f *Factory, got *time.Duration) *cobra.Command{
		"dlq summary": func(f *Factory, got *time.Duration) *cobra.Command {
			return NewCmdDLQSummary(f, func(_ context.Context, o *DLQSummaryOptions) error { *got = o.Watch.interval; return nil })
		},
		"replay show": func(f *Factory, got *time.Duration) *cobra.Command {
			return NewCmdReplayShow(f, func(_ context.Context, o *ReplayShowOptions) error { *got = o.Watch.interval; return nil })
		},
		"replay list": func(f *Factory, got *time.Duration) *cobra.Command {
			return NewCmdReplayList(f, func(_ context.Context, o *ReplayListOptions) error { *got = o.Watch.interval; return nil })
		},
	}
	cases := []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{name: "off", want: 0},
		{name: "bare is every 5s", args: []string{"--watch"}, want: 5 * time.Second},
		{name: "an interval", args: []string{"--watch=2s"}, want: 2 * time.Second},
		{name: "minutes", args: []string{"--watch=1m"}, want: time.Minute},
		{name: "the shortest", args: []string{"--watch=1s"}, want: time.Second},
		{name: "too short", args: []string{"--watch=500ms"}, wantErr: "500ms is too short: use an interval of at least 1s"},
		{name: "zero", args: []string{"--watch=0"}, wantErr: "0 is too short"},
		{name: "negative", args: []string{"--watch=-5s"}, wantErr: "-5s is too short"},
		{name: "no unit", args: []string{"--watch=5"}, wantErr: "use an interval with its unit, such as --watch=5s"},
		{name: "nonsense", args: []string{"--watch=soon"}, wantErr: "use an interval with its unit"},
		{name: "empty", args: []string{"--watch="}, wantErr: "use an interval with its unit"},
		{name: "a space instead of an equals sign", args: []string{"--watch", "10s"}, wantErr: "--watch takes its interval after an equals sign: --watch=10s"},
	}
	for name, build := range commands {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				f, _, _ := testFactory(t)
				args := tc.args
				if name == "replay show" {
					args = append([]string{"7"}, args...)
				}
				got := time.Duration(-1)
				err := runCmd(build(f, &got), args...)
				if tc.wantErr != "" {
					wantExit(t, err, ExitUsage)
					if !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("error %q, want %q", err, tc.wantErr)
					}
					return
				}
				if err != nil || got != tc.want {
					t.Fatalf("--watch = %v (%v), want %v", got, err, tc.want)
				}
			})
		}
	}
	t.Run("help shows the optional value", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		usage := NewCmdDLQSummary(f, nil).Flags().FlagUsages()
		if !strings.Contains(usage, "--watch[=5s]") || strings.Contains(usage, "--watch interval") {
			t.Fatalf("usage:\n%s", usage)
		}
	})
}

func TestWatchRedrawsInPlace(t *testing.T) {
	t.Parallel()
	f, out, errOut := testFactory(t)
	f.IO.StdoutTTY = true
	reads := fakes.NewArchiveReads(fakes.Letters(8))
	if err := watchRun(t, f, 3, nil, summaryWatch(f, reads), "--watch=2s"); err != nil {
		t.Fatalf("a watch stopped by Ctrl-C ends without an error (exit 0): %v", err)
	}
	if audited, unaudited := reads.Counts(); audited != 1 || unaudited != 2 {
		t.Errorf("reads: %d audited, %d unaudited; want 1 audited, then 2 unaudited", audited, unaudited)
	}
	shown := frames(t, out.String())
	if len(shown) != 3 {
		t.Fatalf("%d frames, want 3:\n%q", len(shown), out)
	}
	for i, frame := range shown {
		header := fmt.Sprintf("expiryctl dlq summary · every 2s · updated 03:00:%02d UTC · Ctrl-C to stop\n\n", 2*i)
		if !strings.HasPrefix(frame, header) || !strings.Contains(frame, "CATEGORY") || !strings.Contains(frame, "transient-exhausted") {
			t.Errorf("frame %d:\n%s", i, frame)
		}
	}
	// NO_COLOR (Color false): the cursor controls, and no styles.
	if anyEscape.MatchString(strings.Join(shown, "")) {
		t.Errorf("frames hold escape sequences without colour:\n%q", shown)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %q", errOut)
	}
}

func TestWatchColour(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	f.IO.StdoutTTY, f.IO.Color = true, true
	reads := fakes.NewArchiveReads(fakes.Letters(8))
	if err := watchRun(t, f, 1, nil, summaryWatch(f, reads), "--watch"); err != nil {
		t.Fatal(err)
	}
	shown := frames(t, out.String())
	// The header, and the table's header in the frame, are bold: colour
	// survives drawing the frame into a buffer first.
	if len(shown) != 1 || strings.Count(shown[0], "\x1b[1m") < 2 || !strings.Contains(shown[0], "every 5s") {
		t.Fatalf("frame:\n%q", shown)
	}
}

func TestWatchPiped(t *testing.T) {
	t.Parallel()
	t.Run("one line per update", func(t *testing.T) {
		t.Parallel()
		f, out, errOut := testFactory(t)
		reads := fakes.NewArchiveReads(fakes.Letters(8))
		if err := watchRun(t, f, 3, nil, summaryWatch(f, reads), "--watch=1m"); err != nil {
			t.Fatal(err)
		}
		oldest := fakes.Letter(1).DeadLetteredAt.Format(time.RFC3339)
		line := " waiting=8 overdue=0 per_min_5m=0.0 trend=steady oldest=" + oldest + " transient-exhausted=2 validation=2 not-found=2 conflict=2\n"
		want := "2026-11-30T03:00:00Z" + line + "2026-11-30T03:01:00Z" + line + "2026-11-30T03:02:00Z" + line
		if out.String() != want || errOut.Len() != 0 {
			t.Fatalf("piped watch wrote:\n%s\nwant:\n%s\nstderr: %q", out, want, errOut)
		}
		if audited, unaudited := reads.Counts(); audited != 1 || unaudited != 2 {
			t.Errorf("reads: %d audited, %d unaudited; want 1 and 2", audited, unaudited)
		}
	})
	t.Run("json, one object per update", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		f.IO.StdoutTTY = true // -o json is a stream of documents on a terminal too
		reads := fakes.NewArchiveReads(fakes.Letters(4))
		if err := watchRun(t, f, 2, nil, summaryWatch(f, reads), "--watch=1s", "-o", "json"); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("want 2 lines:\n%s", out)
		}
		for i, line := range lines {
			var update struct {
				At   time.Time `json:"at"`
				Data struct {
					Categories []deadletter.CategorySummary `json:"categories"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(line), &update); err != nil || len(update.Data.Categories) != 4 ||
				!update.At.Equal(time.Date(2026, 11, 30, 3, 0, i, 0, time.UTC)) {
				t.Errorf("line %d = %+v (%v): %s", i, update, err, line)
			}
		}
		if audited, unaudited := reads.Counts(); audited != 1 || unaudited != 1 {
			t.Errorf("reads: %d audited, %d unaudited; want 1 and 1", audited, unaudited)
		}
	})
}

func TestWatchFailures(t *testing.T) {
	t.Parallel()
	blip := errors.New("read tcp 127.0.0.1:40522->127.0.0.1:5432: connection reset by peer (postgres://alice:s3cret@127.0.0.1:5432/expiryctl)")
	t.Run("a transient failure is shown in the frame, and the watch goes on", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		f.IO.StdoutTTY = true
		archive := fakes.Letters(8)
		before := func(i int) {
			switch i {
			case 1:
				archive.SetErr(blip)
			case 2:
				archive.SetErr(nil)
			}
		}
		if err := watchRun(t, f, 3, before, summaryWatch(f, fakes.NewArchiveReads(archive)), "--watch=2s"); err != nil {
			t.Fatal(err)
		}
		shown := frames(t, out.String())
		if len(shown) != 3 {
			t.Fatalf("%d frames, want 3", len(shown))
		}
		failed := shown[1]
		if !strings.HasPrefix(failed, "expiryctl dlq summary · every 2s · updated 03:00:00 UTC") ||
			!strings.Contains(failed, "03:00:02 UTC: could not update: read tcp") ||
			!strings.Contains(failed, "(retrying every 2s); below, the update of 03:00:00 UTC") ||
			!strings.Contains(failed, "transient-exhausted") {
			t.Errorf("the failed update should keep the last one under its error:\n%s", failed)
		}
		if strings.Contains(out.String(), "s3cret") {
			t.Errorf("a password reached the screen:\n%s", failed)
		}
		if !strings.Contains(shown[2], "updated 03:00:04 UTC") || strings.Contains(shown[2], "could not update") {
			t.Errorf("the next update should clear the error:\n%s", shown[2])
		}
	})
	t.Run("piped, a failure goes to stderr and stdout keeps the updates", func(t *testing.T) {
		t.Parallel()
		f, out, errOut := testFactory(t)
		archive := fakes.Letters(2)
		before := func(i int) {
			if i == 1 {
				archive.SetErr(blip)
			} else {
				archive.SetErr(nil)
			}
		}
		if err := watchRun(t, f, 3, before, summaryWatch(f, fakes.NewArchiveReads(archive)), "--watch=1s"); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "2026-11-30T03:00:00Z waiting=2") || !strings.HasPrefix(lines[1], "2026-11-30T03:00:02Z waiting=2") {
			t.Errorf("stdout:\n%s", out)
		}
		if e := errOut.String(); !strings.HasPrefix(e, "2026-11-30T03:00:01Z error: read tcp") || !strings.HasSuffix(e, "(retrying every 1s)\n") ||
			strings.Contains(e, "s3cret") {
			t.Errorf("stderr: %q", e)
		}
	})
	ends := []struct {
		name string
		err  error
		exit int
	}{
		{name: "a refusal", err: &replay.Refusal{Rule: "role", Message: "your login is not a member of expiryctl_operator"}, exit: ExitRefused},
		{name: "permission denied", err: &pgconn.PgError{Code: "42501", Message: "permission denied for table dead_letters"}, exit: ExitRefused},
		{name: "a schema that changed", err: &store.SchemaOutdatedError{}, exit: ExitSchema},
		{name: "an undefined table", err: &pgconn.PgError{Code: "42P01", Message: `relation "expiryctl.dead_letters" does not exist`}, exit: ExitError},
	}
	for _, tc := range ends {
		t.Run(tc.name+" ends the watch with its exit code", func(t *testing.T) {
			t.Parallel()
			f, out, _ := testFactory(t)
			archive := fakes.Letters(2)
			before := func(i int) {
				if i == 1 {
					archive.SetErr(tc.err)
				}
			}
			err := watchRun(t, f, 5, before, summaryWatch(f, fakes.NewArchiveReads(archive)), "--watch=1s")
			wantExit(t, err, tc.exit)
			if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 {
				t.Errorf("want the first update only:\n%s", out)
			}
		})
	}
	t.Run("the first update must succeed", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		err := watchRun(t, f, 3, nil, func(clock *watchClock) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive, o.UnauditedArchive = unreachable[service.Archive](), never[service.Archive](t, "the unaudited archive")
				clock.install(o.Watch)
				return dlqSummaryRun(ctx, o)
			})
		}, "--watch=1s")
		wantExit(t, err, ExitUnavailable)
		if out.Len() != 0 {
			t.Errorf("printed %q", out)
		}
	})
	t.Run("ctrl-c during a read", func(t *testing.T) {
		t.Parallel()
		f, out, _ := testFactory(t)
		reads := fakes.NewArchiveReads(fakes.Letters(2))
		err := watchRun(t, f, 2, nil, func(clock *watchClock) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				o.Archive = reads.Audited
				o.UnauditedArchive = func(context.Context) (service.Archive, error) {
					<-ctx.Done() // the read in flight when Ctrl-C came
					return nil, fmt.Errorf("acquire connection: %w", ctx.Err())
				}
				clock.install(o.Watch)
				return dlqSummaryRun(ctx, o)
			})
		}, "--watch=1s")
		if err != nil {
			t.Fatalf("want a clean stop, got %v", err)
		}
		if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 {
			t.Errorf("want the first update only:\n%s", out)
		}
	})
}

func TestWatchEnds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		ends bool
		exit int
	}{
		{"a plain error", errors.New("unexpected EOF"), false, ExitError},
		{"an unreachable server", &store.ConnectError{Address: "127.0.0.1:5432", Err: errors.New("connection refused")}, false, ExitUnavailable},
		{"a lost connection", &pgconn.PgError{Code: "08006"}, false, ExitUnavailable},
		{"an administrator's shutdown", &pgconn.PgError{Code: "57P01"}, false, ExitUnavailable},
		{"a statement timeout", &pgconn.PgError{Code: "57014"}, false, ExitError},
		{"a serialization failure", &pgconn.PgError{Code: "40001"}, false, ExitError},
		{"too many connections", &pgconn.PgError{Code: "53300"}, false, ExitError},
		{"a lock not available", &pgconn.PgError{Code: "55P03"}, false, ExitError},
		{"permission denied", fmt.Errorf("summary: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for table dead_letters"}), true, ExitRefused},
		{"a governance refusal", &replay.Refusal{Rule: "role"}, true, ExitRefused},
		{"a missing request", &replay.NotFoundError{ID: 7}, true, ExitNotFound},
		{"no schema", store.ErrSchemaMissing, true, ExitSchema},
		{"a syntax error", &pgconn.PgError{Code: "42601"}, true, ExitError},
		{"a data error", &pgconn.PgError{Code: "22P02"}, true, ExitError},
	}
	for _, tc := range cases {
		ends, final := watchEnds(tc.err)
		if ends != tc.ends || ExitCode(final) != tc.exit {
			t.Errorf("%s: ends %v with exit %d, want %v with exit %d", tc.name, ends, ExitCode(final), tc.ends, tc.exit)
		}
	}
}

func TestReplayShowWatch(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, tty bool, args ...string) (string, *fakes.RequestReads, error) {
		t.Helper()
		f, out, _ := testFactory(t)
		f.IO.StdoutTTY = tty
		requests := fakes.NewRequests("bob", fakes.Request(7, "alice", 3))
		reads := fakes.NewRequestReads(requests)
		before := func(i int) {
			if i == 1 {
				_, _ = requests.Cancel(context.Background(), 7, "wrong cohort")
			}
		}
		err := watchRun(t, f, 2, before, func(clock *watchClock) *cobra.Command {
			return NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
				o.Requests, o.UnauditedRequests = reads.Audited, reads.Unaudited
				clock.install(o.Watch)
				return replayShowRun(ctx, o)
			})
		}, args...)
		return out.String(), reads, err
	}
	t.Run("in place", func(t *testing.T) {
		t.Parallel()
		out, reads, err := show(t, true, "7", "--watch", "--sample", "2")
		if err != nil {
			t.Fatal(err)
		}
		shown := frames(t, out)
		if len(shown) != 2 || !strings.HasPrefix(shown[0], "expiryctl replay show 7 · every 5s · updated 03:00:00 UTC") ||
			!strings.Contains(shown[0], "Cohort (2 of 3)") || !strings.Contains(shown[0], "pending") ||
			!strings.Contains(shown[1], "updated 03:00:05 UTC") || !strings.Contains(shown[1], "cancelled") {
			t.Errorf("frames:\n%s", strings.Join(shown, "\n----\n"))
		}
		if audited, unaudited := reads.Counts(); audited != 1 || unaudited != 1 {
			t.Errorf("reads: %d audited, %d unaudited; want 1 and 1", audited, unaudited)
		}
	})
	t.Run("piped", func(t *testing.T) {
		t.Parallel()
		out, _, err := show(t, false, "7", "--watch=10s")
		if err != nil {
			t.Fatal(err)
		}
		want := "2026-11-30T03:00:00Z request=7 kind=replay status=pending items=3 pending=3 changes=0\n" +
			"2026-11-30T03:00:10Z request=7 kind=replay status=cancelled items=3 pending=3 changes=0 halt_reason=\"cancelled by bob\"\n"
		if out != want {
			t.Errorf("piped watch wrote:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("a request that does not exist", func(t *testing.T) {
		t.Parallel()
		_, _, err := show(t, false, "8", "--watch")
		wantExit(t, err, ExitNotFound)
	})
}

func TestReplayListWatch(t *testing.T) {
	t.Parallel()
	list := func(t *testing.T, tty bool, args ...string) (string, string, *fakes.RequestReads, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY = tty
		approved := fakes.Request(2, "carol", 5)
		approved.Status = replay.StatusApproved
		requests := fakes.NewRequests("bob", fakes.Request(1, "alice", 3), approved)
		reads := fakes.NewRequestReads(requests)
		before := func(i int) {
			if i == 2 {
				_, _ = requests.Cancel(context.Background(), 1, "")
			}
		}
		err := watchRun(t, f, 3, before, func(clock *watchClock) *cobra.Command {
			return NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
				o.Requests, o.UnauditedRequests = reads.Audited, reads.Unaudited
				clock.install(o.Watch)
				return replayListRun(ctx, o)
			})
		}, args...)
		return out.String(), errOut.String(), reads, err
	}
	t.Run("piped", func(t *testing.T) {
		t.Parallel()
		out, errOut, reads, err := list(t, false, "--watch=5s")
		if err != nil {
			t.Fatal(err)
		}
		want := "2026-11-30T03:00:00Z requests=2 pending=1 approved=1 open=2:approved,1:pending\n" +
			"2026-11-30T03:00:05Z requests=2 pending=1 approved=1 open=2:approved,1:pending\n" +
			"2026-11-30T03:00:10Z requests=2 approved=1 cancelled=1 open=2:approved\n"
		if out != want || errOut != "" {
			t.Errorf("piped watch wrote:\n%s\nwant:\n%s\nstderr: %q", out, want, errOut)
		}
		if audited, unaudited := reads.Counts(); audited != 1 || unaudited != 2 {
			t.Errorf("reads: %d audited, %d unaudited; want 1 and 2", audited, unaudited)
		}
	})
	t.Run("in place, with the status in the header", func(t *testing.T) {
		t.Parallel()
		out, _, _, err := list(t, true, "--watch", "--status", "pending")
		if err != nil {
			t.Fatal(err)
		}
		shown := frames(t, out)
		if len(shown) != 3 || !strings.HasPrefix(shown[0], "expiryctl replay list --status pending · every 5s") ||
			!strings.Contains(shown[0], "ID  KIND") || !strings.Contains(shown[2], "no requests") {
			t.Errorf("frames:\n%s", strings.Join(shown, "\n----\n"))
		}
	})
}

func TestLogfmt(t *testing.T) {
	t.Parallel()
	got := (&logfmt{}).add("n", 3).add("queue", "reservation-expiry.dlq").add("at", "2026-11-30T03:00:00Z").
		add("why", "INC-4211 db failover").add("empty", "").add("hostile", "x\x1b]0;pwned\x07").add("quote", `a"b`).
		add("bidi", "r-\u202e1").add("eq", "a=b").String()
	want := `n=3 queue=reservation-expiry.dlq at=2026-11-30T03:00:00Z why="INC-4211 db failover" empty= ` +
		`hostile=x\x1b]0;pwned\x07 quote="a\"b" bidi=r-\u202e1 eq="a=b"`
	if got != want {
		t.Errorf("logfmt:\n got %s\nwant %s", got, want)
	}
}

func TestFormatInterval(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 5 * time.Second: "5s", 90 * time.Second: "1m30s", time.Minute: "1m",
		time.Hour: "1h", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := phrase.Duration(d); got != want {
			t.Errorf("phrase.Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestWatchFitsTheTerminal(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	f.IO.StdoutTTY = true
	reads := fakes.NewArchiveReads(fakes.Letters(8))
	err := watchRun(t, f, 1, nil, func(clock *watchClock) *cobra.Command {
		return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
			o.Archive, o.UnauditedArchive = reads.Audited, reads.Unaudited
			o.LiveQueues = func(context.Context) (service.LiveQueues, error) {
				return &fakes.LiveQueues{Report: fakes.TopologyReport(o.WorkQueue)}, nil
			}
			clock.install(o.Watch)
			o.Watch.size = func(io.Writer) (int, int, bool) { return 40, 6, true }
			return dlqSummaryRun(ctx, o)
		})
	}, "--watch")
	if err != nil {
		t.Fatal(err)
	}
	shown := frames(t, out.String())
	// Header, blank line and the summary (its headlines, then the tables)
	// are taller than six rows: four are shown and a note, the last row
	// left free.
	lines := strings.Split(strings.TrimSuffix(shown[0], "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[4], "… ") || !strings.HasSuffix(lines[4], " more lines: a taller terminal show…") ||
		lines[0] != "expiryctl dlq summary · every 5s · upda…" || !strings.HasPrefix(lines[2], "Arrivals") {
		t.Fatalf("frame on a 40×6 terminal:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if ansi.StringWidth(l) > 40 {
			t.Errorf("line wider than the terminal: %q", l)
		}
	}
}

// TestWatchIsAuditedOnce runs the watches over the services the Factory
// builds, against PostgreSQL: however many updates, one audit row each.
func TestWatchIsAuditedOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	f, out, _ := auditFactory(t, db, "alice")
	builds := map[string]func(*watchClock) *cobra.Command{
		"dlq.summary": func(clock *watchClock) *cobra.Command {
			return NewCmdDLQSummary(f, func(ctx context.Context, o *DLQSummaryOptions) error {
				clock.install(o.Watch)
				return dlqSummaryRun(ctx, o)
			})
		},
		"replay.list": func(clock *watchClock) *cobra.Command {
			return NewCmdReplayList(f, func(ctx context.Context, o *ReplayListOptions) error {
				clock.install(o.Watch)
				return replayListRun(ctx, o)
			})
		},
	}
	for action, build := range builds {
		out.Reset()
		// Ctrl-C as the fifth update starts: a real read, unlike a fake's,
		// then fails on the cancelled context, and the watch ends quietly.
		ctx, cancel := context.WithCancel(context.Background())
		clock := &watchClock{updates: 100, cancel: cancel}
		clock.before = func(i int) {
			if i == 4 {
				cancel()
			}
		}
		if err := runCmdContext(ctx, build(clock), "--watch=1s"); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		if lines := strings.Count(out.String(), "\n"); lines != 4 {
			t.Errorf("%s: %d updates, want 4:\n%s", action, lines, out)
		}
		var n int
		var interval string
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(details->'watch'->>'interval'), '')
			FROM expiryctl.audit_log WHERE action = $1`, action).Scan(&n, &interval); err != nil {
			t.Fatal(err)
		}
		if n != 1 || interval != "1s" {
			t.Errorf("a watch of 4 updates left %d %s rows with watch interval %q, want 1 saying 1s", n, action, interval)
		}
	}
}

func TestSummaryLineSetsPermanentApart(t *testing.T) {
	t.Parallel()
	line := summaryLine(deadletter.Signals{Overdue: deadletter.Overdue{Count: 3, Permanent: 2}}, holdsAtSource{})
	if !strings.Contains(line, "overdue=3 ") || !strings.Contains(line, " overdue_for_good=2 ") {
		t.Errorf("line %q: want overdue=3 and, apart, overdue_for_good=2", line)
	}
	if line := summaryLine(deadletter.Signals{Overdue: deadletter.Overdue{Count: 3}}, holdsAtSource{}); strings.Contains(line, "for_good") {
		t.Errorf("line %q: none failed for good, want no key for them", line)
	}
}

func TestSummaryLineCarriesTheHoldsAtSource(t *testing.T) {
	t.Parallel()
	// 3 overdue letters a retry can fix, 2 conflicts: their holds moved
	// on, they speak for none.
	overdue := deadletter.Overdue{Count: 3, Permanent: 2, ByCategory: []deadletter.OverdueCategory{
		{Category: deadletter.TransientExhausted, Count: 3}, {Category: deadletter.Conflict, Permanent: true, Count: 2}}}
	for _, c := range []struct {
		name         string
		holds        holdsAtSource
		want, absent []string
	}{
		{"no gap query: no key", newHoldsAtSource(replay.HoldsGap{}, replay.ErrNoGapQuery, overdue), nil, []string{"at_source"}},
		{"read: the count and those no letter speaks for", newHoldsAtSource(replay.HoldsGap{PastDeadline: 10}, nil, overdue),
			[]string{" at_source=10 ", " unaccounted=7 "}, nil},
		{"read, all spoken for: no unaccounted", newHoldsAtSource(replay.HoldsGap{PastDeadline: 2}, nil, overdue),
			[]string{" at_source=2 "}, []string{"unaccounted"}},
		{"unreadable: said, the reason left to the full summary",
			newHoldsAtSource(replay.HoldsGap{}, &replay.GapQueryError{Err: errors.New("connection refused")}, overdue),
			[]string{" at_source=unavailable "}, []string{"refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			line := summaryLine(deadletter.Signals{Overdue: overdue}, c.holds)
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
			for _, d := range c.absent {
				if strings.Contains(line, d) {
					t.Errorf("line %q has %q", line, d)
				}
			}
		})
	}
}
