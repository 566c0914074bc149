package commands

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/promtooltest"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// lockedBuffer is a stream a serving command writes from its goroutines
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// servingFactory is testFactory with a stderr that may be read while the
// command still runs.
func servingFactory(t *testing.T) (*Factory, *lockedBuffer) {
	t.Helper()
	f, _, _ := testFactory(t)
	errOut := &lockedBuffer{}
	f.IO.ErrOut = errOut
	return f, errOut
}

var servingOn = regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)

// served is a serving command started by startServing.
type served struct {
	url    string
	errOut *lockedBuffer
	cancel context.CancelFunc
	done   chan error
}

// stop interrupts the command, as Ctrl-C does, and returns its error.
func (s *served) stop() error {
	s.cancel()
	return <-s.done
}

// startServing runs cmd in the background until stop, and waits for it to
// say where it serves; a command that ends first fails the test with its
// error.
func startServing(t *testing.T, errOut *lockedBuffer, run func(ctx context.Context) error) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(cancel)
	deadline := time.After(10 * time.Second)
	for {
		if m := servingOn.FindStringSubmatch(errOut.String()); m != nil {
			return &served{url: m[1], errOut: errOut, cancel: cancel, done: done}
		}
		select {
		case err := <-done:
			t.Fatalf("the command ended before serving: %v\nstderr: %s", err, errOut)
		case <-deadline:
			t.Fatalf("not serving after 10 s; stderr: %s", errOut)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return body
}

func TestMetricsServeFlags(t *testing.T) {
	t.Parallel()
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		var got *MetricsServeOptions
		if err := runCmd(NewCmdMetricsServe(f, func(_ context.Context, o *MetricsServeOptions) error { got = o; return nil })); err != nil {
			t.Fatal(err)
		}
		if got.Listen != "127.0.0.1:9464" || got.Interval != 15*time.Second || got.WorkQueue != "reservation-expiry" || got.MaxClasses != 10 {
			t.Fatalf("defaults %+v", got)
		}
	})
	for _, args := range [][]string{{"--interval", "500ms"}, {"--max-classes", "0"}, {"--max-classes", "1000"}, {"--work-queue", ""}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			err := runCmd(NewCmdMetricsServe(f, func(context.Context, *MetricsServeOptions) error {
				t.Error("ran despite a flag error")
				return nil
			}), args...)
			wantExit(t, err, ExitUsage)
		})
	}
}

func TestMetricsServeRun(t *testing.T) {
	t.Parallel()
	type bundle struct {
		source   *fakes.MetricsSource
		recorder *fakes.Recorder
		queue    string
	}
	serveWith := func(t *testing.T, snap metrics.Snapshot, args ...string) (*served, *bundle) {
		t.Helper()
		f, errOut := servingFactory(t)
		b := &bundle{source: &fakes.MetricsSource{Snap: snap}, recorder: &fakes.Recorder{Actor: "alice"}}
		cmd := NewCmdMetricsServe(f, func(ctx context.Context, o *MetricsServeOptions) error {
			o.Source = func(_ context.Context, workQueue string) (metrics.Source, error) {
				b.queue = workQueue
				return b.source, nil
			}
			o.Recorder = serve[service.Recorder](b.recorder)
			return metricsServeRun(ctx, o)
		})
		s := startServing(t, errOut, func(ctx context.Context) error {
			return runCmdContext(ctx, cmd, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
		})
		return s, b
	}

	t.Run("serves the snapshot, refreshes it, audits once and stops cleanly", func(t *testing.T) {
		t.Parallel()
		s, b := serveWith(t, fakes.MetricsSnapshot(), "--interval", "1s", "--work-queue", "orders-expiry")
		body := scrape(t, s.url)
		got := promtooltest.Samples(t, body)
		if got[`expiryctl_dead_letters_waiting{category="transient-exhausted"}`] != 12 || got[`expiryctl_replay_items_published_total`] != 7 {
			t.Fatalf("scrape:\n%s", body)
		}
		if b.queue != "orders-expiry" {
			t.Errorf("source built for work queue %q", b.queue)
		}
		deadline := time.Now().Add(10 * time.Second)
		for b.source.Calls() < 2 {
			if time.Now().After(deadline) {
				t.Fatal("no refresh within 10 s of a 1 s interval")
			}
			time.Sleep(20 * time.Millisecond)
		}
		entries := b.recorder.Recorded()
		if len(entries) != 1 || entries[0].Action != "metrics.serve" {
			t.Fatalf("audit entries after %d snapshots: %+v", b.source.Calls(), entries)
		}
		details, _ := entries[0].Details.(map[string]any)
		if listen, _ := details["listen"].(string); details["work_queue"] != "orders-expiry" || details["interval"] != "1s" ||
			!strings.HasPrefix(listen, "127.0.0.1:") || s.url != "http://"+listen+"/metrics" {
			t.Errorf("audit details %v (serving on %s)", details, s.url)
		}
		if err := s.stop(); err != nil {
			t.Fatalf("an interrupted exporter returned %v, want nil (exit 0)", err)
		}
		if _, err := http.Get(s.url); err == nil {
			t.Error("still serving after the stop")
		}
	})
	t.Run("says which signals are left out", func(t *testing.T) {
		t.Parallel()
		snap := metrics.Snapshot{Missing: []string{"overdue holds: not wired"}}
		s, _ := serveWith(t, snap)
		if !strings.Contains(s.errOut.String(), "metrics: left out: overdue holds: not wired\n") {
			t.Errorf("stderr: %s", s.errOut)
		}
		if got := promtooltest.Samples(t, scrape(t, s.url)); got[`expiryctl_metrics_signal_available{signal="overdue_holds"}`] != 0 {
			t.Errorf("overdue holds available: %v", got)
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a first reading that fails fails the command", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		rec := &fakes.Recorder{}
		err := runCmd(NewCmdMetricsServe(f, func(ctx context.Context, o *MetricsServeOptions) error {
			o.Source = func(context.Context, string) (metrics.Source, error) {
				return &fakes.MetricsSource{Err: errors.New("permission denied for table dead_letter_tallies")}, nil
			}
			o.Recorder = serve[service.Recorder](rec)
			return metricsServeRun(ctx, o)
		}), "--listen", "127.0.0.1:0")
		if err == nil || !strings.Contains(err.Error(), "read the metrics: permission denied") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("an address in use fails before connecting", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, _, _ := testFactory(t)
		err = runCmd(NewCmdMetricsServe(f, func(ctx context.Context, o *MetricsServeOptions) error {
			o.Source = func(context.Context, string) (metrics.Source, error) {
				t.Error("the source was built although the address is taken")
				return nil, errors.New("no")
			}
			return metricsServeRun(ctx, o)
		}), "--listen", ln.Addr().String())
		if err == nil || !strings.Contains(err.Error(), "cannot serve metrics on "+ln.Addr().String()) {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("an unreachable database fails the command", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdMetricsServe(f, func(ctx context.Context, o *MetricsServeOptions) error {
			o.Source = func(ctx context.Context, _ string) (metrics.Source, error) {
				return unreachable[metrics.Source]()(ctx)
			}
			return metricsServeRun(ctx, o)
		}), "--listen", "127.0.0.1:0")
		_, connErr := unreachable[metrics.Source]()(context.Background())
		if err == nil || err.Error() != connErr.Error() {
			t.Fatalf("error = %v, want the connection error", err)
		}
		wantExit(t, err, ExitCode(connErr))
	})
}

// fakeTally is the replay side of the metrics source, in memory.
type fakeTally struct {
	open  map[replay.Status]int
	tally replay.Tally
	err   error
}

func (f *fakeTally) CountOpen(context.Context) (map[replay.Status]int, error) { return f.open, f.err }
func (f *fakeTally) Tally(context.Context) (replay.Tally, error)              { return f.tally, f.err }

// fakeQueues is a service.LiveQueues that reports report.
type fakeQueues struct {
	report deadletter.QueueReport
	asked  []string
}

func (f *fakeQueues) Topology(_ context.Context, workQueue string) (deadletter.QueueReport, error) {
	f.asked = append(f.asked, workQueue)
	return f.report, nil
}

func TestMetricsSourceSnapshot(t *testing.T) {
	t.Parallel()
	replayed := fakes.Letter(5)
	replayed.Status = deadletter.StatusReplayed
	archive := fakes.NewArchive(fakes.Letter(4), fakes.Letter(8), replayed)
	tally := &fakeTally{
		open: map[replay.Status]int{replay.StatusRunning: 1},
		tally: replay.Tally{Open: map[replay.Status]map[string]int64{replay.StatusRunning: {"confirmed": 7, "pending": 3}}, Published: 40,
			Requests: map[int64]replay.RequestItems{
				3: {Status: replay.StatusRunning, States: map[string]int64{"confirmed": 7}},
				9: {Status: replay.StatusRunning, States: map[string]int64{"pending": 3}},
			},
			Halts: map[string]int64{replay.ConditionQueueDepth: 2}},
	}
	head := 90 * time.Second
	queues := &fakeQueues{report: deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: "reservation-expiry", Role: deadletter.RoleWork, Ready: 4, Unacked: 1, Consumers: 2, HeadAge: &head},
	}}}
	src := &metricsSource{archive: archive, replay: tally, queues: queues, workQueue: "reservation-expiry"}
	snap, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Letters 4 and 8 are transient-exhausted and dead, 5 validation and replayed.
	want := []metrics.CategoryLetters{
		{Category: "transient-exhausted", Waiting: 2, Ingested: 2, OldestWaiting: fakes.Letter(4).DeadLetteredAt,
			ByStatus: map[string]int64{"dead": 2, "in_request": 0, "replayed": 0, "discarded": 0}},
		{Category: "validation", Waiting: 0, Ingested: 1,
			ByStatus: map[string]int64{"dead": 0, "in_request": 0, "replayed": 1, "discarded": 0}},
	}
	if len(snap.Categories) != len(want) {
		t.Fatalf("categories %+v", snap.Categories)
	}
	for i := range want {
		got := snap.Categories[i]
		if got.Category != want[i].Category || got.Waiting != want[i].Waiting || got.Ingested != want[i].Ingested ||
			!got.OldestWaiting.Equal(want[i].OldestWaiting) || !maps.Equal(got.ByStatus, want[i].ByStatus) {
			t.Errorf("category %d = %+v, want %+v", i, snap.Categories[i], want[i])
		}
	}
	// From the archive's signals: no letter here has a due_at, and the
	// waiting ones per error class (letter 5's class has none waiting).
	if snap.Overdue == nil || snap.Overdue.Count != 0 || snap.ErrorClasses == nil ||
		!maps.Equal(snap.ErrorClasses.Waiting, map[string]int64{"db_timeout": 2, "validation": 0}) {
		t.Errorf("overdue %+v, classes %+v, want the archive's signals", snap.Overdue, snap.ErrorClasses)
	}
	r := snap.Replay
	if r == nil || len(r.Requests) != 4 || r.Requests["running"] != 1 || r.Requests["halted"] != 0 || r.Requests["pending"] != 0 ||
		r.Items["running"]["confirmed"] != 7 || r.Published != 40 ||
		!maps.Equal(r.Halts, map[string]int64{"failure-ratio": 0, "queue-depth": 2, "redead-ratio": 0, "eligibility": 0,
			"unsettled-ratio": 0, "conflict-ratio": 0, "outcome-query": 0}) ||
		len(r.OpenRequests) != 2 || r.OpenRequests[0].ID != 9 || r.OpenRequests[1].States["confirmed"] != 7 {
		t.Errorf("replay %+v", r)
	}
	if q := snap.Queues; q == nil || q.Unavailable != "" || len(q.Queues) != 1 || q.Queues[0].Role != "work" || *q.Queues[0].HeadAge != head ||
		queues.asked[0] != "reservation-expiry" {
		t.Errorf("queues %+v (asked %v)", snap.Queues, queues.asked)
	}
	if len(snap.Missing) != 0 {
		t.Errorf("missing %q, want every signal", snap.Missing)
	}

	t.Run("an unreadable management API is a missing signal, not a failure", func(t *testing.T) {
		t.Parallel()
		src := &metricsSource{archive: archive, replay: tally, workQueue: "q",
			queues: &fakeQueues{report: deadletter.QueueReport{Unavailable: "management API at http://127.0.0.1:15672: connection refused"}}}
		snap, err := src.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Queues == nil || snap.Queues.Unavailable == "" || !strings.Contains(strings.Join(snap.Missing, "\n"), "connection refused") {
			t.Errorf("queues %+v, missing %q", snap.Queues, snap.Missing)
		}
	})
	t.Run("without a management API reader the live queues are missing", func(t *testing.T) {
		t.Parallel()
		snap, err := (&metricsSource{archive: archive, replay: tally}).Snapshot(context.Background())
		if err != nil || snap.Queues != nil || !strings.Contains(strings.Join(snap.Missing, "\n"), "live queues") {
			t.Errorf("queues %+v, missing %q, %v", snap.Queues, snap.Missing, err)
		}
	})
	t.Run("a reservation database that cannot answer is a missing signal, not a failure", func(t *testing.T) {
		t.Parallel()
		holds := func(ctx context.Context) (replay.HoldsGap, error) {
			return replay.HoldsGap{}, &replay.GapQueryError{Err: errors.New("the reservation database did not answer within 7s")}
		}
		snap, err := (&metricsSource{archive: archive, replay: tally, holds: holds}).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Holds == nil || snap.Holds.Up || snap.Overdue == nil || snap.Replay == nil ||
			!strings.Contains(strings.Join(snap.Missing, "\n"), "holds at source: the policy's gap query failed") {
			t.Errorf("holds %+v, overdue %+v, replay %v, missing %q: want the gap down and the rest whole", snap.Holds, snap.Overdue, snap.Replay != nil, snap.Missing)
		}
	})
	t.Run("a policy without a gap query exports no gap", func(t *testing.T) {
		t.Parallel()
		holds := func(ctx context.Context) (replay.HoldsGap, error) { return replay.HoldsGap{}, replay.ErrNoGapQuery }
		snap, err := (&metricsSource{archive: archive, replay: tally, holds: holds}).Snapshot(context.Background())
		if err != nil || snap.Holds != nil || strings.Contains(strings.Join(snap.Missing, "\n"), "holds at source") {
			t.Errorf("holds %+v, missing %q, %v: want no gap series and nothing missing", snap.Holds, snap.Missing, err)
		}
	})
	t.Run("a database failure fails the reading", func(t *testing.T) {
		t.Parallel()
		broken := &fakeTally{err: errors.New("connection reset")}
		if _, err := (&metricsSource{archive: archive, replay: broken}).Snapshot(context.Background()); err == nil {
			t.Error("no error")
		}
	})
}

func TestReadingReporterSaysEachTryAndTheRecovery(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	report := readingReporter(&out, func() time.Time { return clock })
	refused := errors.New("connection refused")
	report(nil, 15*time.Second)
	report(refused, 500*time.Millisecond)
	clock = clock.Add(time.Second)
	report(refused, time.Second)
	clock = clock.Add(2 * time.Second)
	report(errors.New("57P03: the database system is starting up"), 2*time.Second)
	clock = clock.Add(3 * time.Second)
	report(nil, 15*time.Second)
	report(nil, 15*time.Second)
	want := `warning: metrics reading failed (try 1), serving the last good one meanwhile, reading again in 500ms: connection refused
metrics reading failed again (try 2), reading again in 1s
warning: metrics reading failed (try 3), serving the last good one meanwhile, reading again in 2s: 57P03: the database system is starting up
metrics reading recovered after 6s (3 failed tries)
`
	if out.String() != want {
		t.Fatalf("stderr:\n%s\nwant:\n%s", out.String(), want)
	}
}
