package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-retry"

	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/promtooltest"
)

// clock is a settable clock, for snapshots and scrapes at known times.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// setup returns an exporter over src whose snapshots are taken at
// fakes.Epoch, with its clock, registered alone in a registry.
func setup(t *testing.T, src metrics.Source, opts metrics.Options) (*metrics.Exporter, *clock, *prometheus.Registry) {
	t.Helper()
	c := &clock{now: fakes.Epoch}
	opts.Now = c.Now
	exp := metrics.NewExporter(src, opts)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exp)
	return exp, c, reg
}

// gather scrapes reg into samples keyed as the text format writes them.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func wantSamples(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s is missing", k)
			continue
		}
		if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
}

func refresh(t *testing.T, exp *metrics.Exporter) {
	t.Helper()
	if _, err := exp.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExporterServesTheSnapshot(t *testing.T) {
	t.Parallel()
	exp, c, reg := setup(t, &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}, metrics.Options{})
	refresh(t, exp)
	c.Set(fakes.Epoch.Add(30 * time.Second))
	got := gather(t, reg)
	wantSamples(t, got, map[string]float64{
		`expiryctl_dead_letters_waiting{category="transient-exhausted"}`:                   12,
		`expiryctl_dead_letters_waiting{category="validation"}`:                            0,
		`expiryctl_dead_letters_ingested_total{category="transient-exhausted"}`:            40,
		`expiryctl_dead_letters_ingested_total{category="validation"}`:                     3,
		`expiryctl_dead_letters{category="transient-exhausted",status="replayed"}`:         25,
		`expiryctl_dead_letters{category="validation",status="discarded"}`:                 3,
		`expiryctl_dead_letters{category="validation",status="dead"}`:                      0,
		`expiryctl_dead_letter_oldest_waiting_age_seconds{category="transient-exhausted"}`: 3630,
		`expiryctl_dead_letters_waiting_by_error_class{error_class="db_timeout"}`:          9,
		`expiryctl_dead_letters_waiting_by_error_class{error_class="throttled"}`:           3,
		`expiryctl_overdue_holds`:                                                                                      5,
		`expiryctl_overdue_hold_lateness_seconds{stat="p50"}`:                                                          120,
		`expiryctl_overdue_hold_lateness_seconds{stat="p99"}`:                                                          540,
		`expiryctl_overdue_hold_lateness_seconds{stat="max"}`:                                                          600,
		`expiryctl_rabbitmq_management_up`:                                                                             1,
		`expiryctl_rabbitmq_queue_messages_ready{queue="reservation-expiry",role="work"}`:                              4,
		`expiryctl_rabbitmq_queue_messages_unacked{queue="reservation-expiry",role="work"}`:                            2,
		`expiryctl_rabbitmq_queue_consumers{queue="reservation-expiry",role="work"}`:                                   1,
		`expiryctl_rabbitmq_queue_head_message_age_seconds{queue="reservation-expiry",role="work"}`:                    90,
		`expiryctl_rabbitmq_queue_message_rate_per_second{operation="publish",queue="reservation-expiry",role="work"}`: 2.5,
		`expiryctl_rabbitmq_queue_messages_ready{queue="reservation-expiry.retry.5000",role="retry"}`:                  6,
		`expiryctl_rabbitmq_queue_messages_ready{queue="reservation-expiry.dlq",role="dead-letter"}`:                   1,
		`expiryctl_replay_requests{status="running"}`:                                                                  1,
		`expiryctl_replay_requests{status="halted"}`:                                                                   0,
		`expiryctl_replay_items{request_status="running",state="confirmed"}`:                                           7,
		`expiryctl_replay_items{request_status="running",state="pending"}`:                                             3,
		`expiryctl_replay_items_published_total`:                                                                       7,
		`expiryctl_replay_request_items{request="42",state="pending",status="running"}`:                                3,
		`expiryctl_replay_request_outcomes{fate="came_back",request="42",status="running"}`:                            1,
		`expiryctl_replay_request_outcomes{fate="unknown",request="42",status="running"}`:                              6,
		`expiryctl_replay_halts_total{condition="queue-depth"}`:                                                        1,
		`expiryctl_replay_halts_total{condition="failure-ratio"}`:                                                      0,
		`expiryctl_metrics_snapshot_age_seconds`:                                                                       30,
		`expiryctl_metrics_snapshot_duration_seconds`:                                                                  0,
		`expiryctl_metrics_snapshots_total`:                                                                            1,
		`expiryctl_metrics_snapshot_errors_total`:                                                                      0,
		`expiryctl_metrics_signal_available{signal="error_classes"}`:                                                   1,
		`expiryctl_metrics_signal_available{signal="overdue_holds"}`:                                                   1,
		`expiryctl_metrics_signal_available{signal="live_queues"}`:                                                     1,
		`expiryctl_metrics_signal_available{signal="replay"}`:                                                          1,
	})
	// Nothing the broker did not report is made up: the retry queue has no
	// head age and no rates, a category with none waiting no oldest age.
	for _, absent := range []string{
		`expiryctl_rabbitmq_queue_head_message_age_seconds{queue="reservation-expiry.retry.5000",role="retry"}`,
		`expiryctl_rabbitmq_queue_message_rate_per_second{operation="deliver",queue="reservation-expiry",role="work"}`,
		`expiryctl_dead_letter_oldest_waiting_age_seconds{category="validation"}`,
	} {
		if v, ok := got[absent]; ok {
			t.Errorf("%s = %v, want it absent", absent, v)
		}
	}
}

// TestUnavailableSignalsAreLeftOut: a signal the source could not read has
// no series at all, so that no dashboard shows "0 overdue" for "unknown".
func TestUnavailableSignalsAreLeftOut(t *testing.T) {
	t.Parallel()
	snap := metrics.Snapshot{Categories: []metrics.CategoryLetters{{Category: "validation", Waiting: 1, Ingested: 1, OldestWaiting: fakes.Epoch}}}
	exp, _, reg := setup(t, &fakes.MetricsSource{Snap: snap}, metrics.Options{})
	refresh(t, exp)
	got := gather(t, reg)
	for k := range got {
		for _, prefix := range []string{"expiryctl_overdue", "expiryctl_dead_letters_waiting_by_error_class", "expiryctl_rabbitmq", "expiryctl_replay"} {
			if strings.HasPrefix(k, prefix) {
				t.Errorf("%s is exported for a signal that is not available", k)
			}
		}
	}
	wantSamples(t, got, map[string]float64{
		`expiryctl_dead_letters_waiting{category="validation"}`:      1,
		`expiryctl_metrics_signal_available{signal="error_classes"}`: 0,
		`expiryctl_metrics_signal_available{signal="overdue_holds"}`: 0,
		`expiryctl_metrics_signal_available{signal="live_queues"}`:   0,
		`expiryctl_metrics_signal_available{signal="replay"}`:        0,
	})
}

func TestManagementAPIDownSaysSo(t *testing.T) {
	t.Parallel()
	snap := metrics.Snapshot{Queues: &metrics.LiveQueues{Unavailable: "connection refused"}, Overdue: &metrics.OverdueHolds{}}
	exp, _, reg := setup(t, &fakes.MetricsSource{Snap: snap}, metrics.Options{})
	refresh(t, exp)
	got := gather(t, reg)
	wantSamples(t, got, map[string]float64{
		`expiryctl_rabbitmq_management_up`:                         0,
		`expiryctl_metrics_signal_available{signal="live_queues"}`: 0,
		// No overdue hold: a count of zero, and no lateness to rank.
		`expiryctl_overdue_holds`: 0,
	})
	for k := range got {
		if strings.HasPrefix(k, "expiryctl_rabbitmq_queue_") || strings.HasPrefix(k, "expiryctl_overdue_hold_lateness") {
			t.Errorf("%s is exported", k)
		}
	}
}

// TestErrorClassesAreBounded: classes come from messages, so however many
// there are, at most MaxClasses are named and the rest summed.
func TestErrorClassesAreBounded(t *testing.T) {
	t.Parallel()
	waiting := map[string]int64{"": 2, "other": 1, strings.Repeat("é", 40): 50}
	for i := range 20 {
		waiting[fmt.Sprintf("class_%02d", i)] = int64(i + 1)
	}
	exp, _, reg := setup(t, &fakes.MetricsSource{Snap: metrics.Snapshot{ErrorClasses: &metrics.ClassCounts{Waiting: waiting}}},
		metrics.Options{MaxClasses: 3})
	refresh(t, exp)
	classes := map[string]float64{}
	for k, v := range gather(t, reg) {
		if name, ok := strings.CutPrefix(k, `expiryctl_dead_letters_waiting_by_error_class{error_class="`); ok {
			classes[strings.TrimSuffix(name, `"}`)] = v
		}
	}
	long := strings.Repeat("é", 32) // 64 bytes, cut on a rune boundary
	// 1+2+…+18 = 171 in the unnamed classes, plus "other" itself and "none".
	want := map[string]float64{long: 50, "class_19": 20, "class_18": 19, "other": 171 + 1 + 2}
	if len(classes) != len(want) {
		t.Fatalf("exported classes %v, want %v", classes, want)
	}
	for c, n := range want {
		if classes[c] != n {
			t.Errorf("class %q = %v, want %v (all: %v)", c, classes[c], n, classes)
		}
	}
}

// TestAFailedRefreshServesTheLastSnapshot: the numbers stay, grow older,
// and the failure is counted.
func TestAFailedRefreshServesTheLastSnapshot(t *testing.T) {
	t.Parallel()
	src := &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}
	exp, c, reg := setup(t, src, metrics.Options{})
	refresh(t, exp)
	src.SetErr(errors.New("connection refused"))
	c.Set(fakes.Epoch.Add(2 * time.Minute))
	if _, err := exp.Refresh(context.Background()); err == nil {
		t.Fatal("the failed snapshot returned no error")
	}
	wantSamples(t, gather(t, reg), map[string]float64{
		`expiryctl_metrics_snapshots_total`:                                                1,
		`expiryctl_metrics_snapshot_errors_total`:                                          1,
		`expiryctl_metrics_snapshot_age_seconds`:                                           120,
		`expiryctl_dead_letters_waiting{category="transient-exhausted"}`:                   12,
		`expiryctl_dead_letter_oldest_waiting_age_seconds{category="transient-exhausted"}`: 3720,
	})
}

func TestBeforeTheFirstSnapshotOnlyTheCountersAreExported(t *testing.T) {
	t.Parallel()
	_, _, reg := setup(t, &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}, metrics.Options{})
	got := gather(t, reg)
	want := map[string]float64{`expiryctl_metrics_snapshots_total`: 0, `expiryctl_metrics_snapshot_errors_total`: 0}
	if len(got) != len(want) {
		t.Fatalf("exported %v, want only %v", got, want)
	}
	wantSamples(t, got, want)
}

// TestScrapesNeverReachTheSource: only the refresh loop takes snapshots.
func TestScrapesNeverReachTheSource(t *testing.T) {
	t.Parallel()
	src := &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}
	exp, _, reg := setup(t, src, metrics.Options{})
	refresh(t, exp)
	for range 100 {
		gather(t, reg)
	}
	if n := src.Calls(); n != 1 {
		t.Fatalf("100 scrapes took %d snapshots, want the 1 of the refresh", n)
	}
}

func TestRunRefreshesOnItsInterval(t *testing.T) {
	t.Parallel()
	src := &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}
	exp := metrics.NewExporter(src, metrics.Options{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan error, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		exp.Run(ctx, func(err error, _ time.Duration) {
			select {
			case reports <- err:
			default:
			}
		})
	}()
	for range 3 {
		select {
		case err := <-reports:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no refresh within 10 s")
		}
	}
	cancel()
	<-done
	if src.Calls() < 3 {
		t.Fatalf("%d snapshots, want 3 or more", src.Calls())
	}
}

// TestRunRetriesOnItsScheduleWithinTheInterval: after failed refreshes the
// waits follow the Retry schedule, never longer than the interval, and a
// success goes back to the interval with the schedule started afresh.
func TestRunRetriesOnItsScheduleWithinTheInterval(t *testing.T) {
	t.Parallel()
	src := &fakes.MetricsSource{Snap: fakes.MetricsSnapshot(), Err: errors.New("connection refused")}
	const interval = 40 * time.Millisecond
	schedules := 0
	exp := metrics.NewExporter(src, metrics.Options{Interval: interval, Retry: func() retry.Backoff {
		schedules++
		return retry.NewExponential(10 * time.Millisecond)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	type report struct {
		failed bool
		next   time.Duration
	}
	reports := make(chan report, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		exp.Run(ctx, func(err error, next time.Duration) {
			if len(reports) == 4 {
				src.SetErr(nil)
			}
			if len(reports) == 5 {
				src.SetErr(errors.New("connection refused"))
			}
			reports <- report{err != nil, next}
			if len(reports) == 8 {
				cancel()
			}
		})
	}()
	<-done
	close(reports)
	var got []report
	for r := range reports {
		got = append(got, r)
	}
	want := []report{{true, 10 * time.Millisecond}, {true, 20 * time.Millisecond}, {true, interval}, {true, interval},
		{true, interval}, {false, interval}, {true, 10 * time.Millisecond}, {true, 20 * time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	if schedules != 2 {
		t.Fatalf("%d schedules, want a fresh one for each of the 2 runs of failures", schedules)
	}
}

func TestIngestCounters(t *testing.T) {
	t.Parallel()
	c := metrics.NewIngestCounters("reservation-expiry.dlq")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	c.Observe(40, 2, 3)
	c.Lost(metrics.LostRabbitMQ)
	c.Lost(metrics.LostRabbitMQ)
	wantSamples(t, gather(t, reg), map[string]float64{
		`expiryctl_ingest_letters_total{outcome="stored",queue="reservation-expiry.dlq"}`:              40,
		`expiryctl_ingest_letters_total{outcome="duplicate",queue="reservation-expiry.dlq"}`:           2,
		`expiryctl_ingest_batches_total{queue="reservation-expiry.dlq"}`:                               3,
		`expiryctl_ingest_connection_losses_total{queue="reservation-expiry.dlq",server="rabbitmq"}`:   2,
		`expiryctl_ingest_connection_losses_total{queue="reservation-expiry.dlq",server="postgresql"}`: 0,
	})
}

// serveFull serves a full snapshot and ingest counters on a loopback port
// and returns the scrape.
func serveFull(t *testing.T) []byte {
	t.Helper()
	exp := metrics.NewExporter(&fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}, metrics.Options{Now: fakes.Now})
	refresh(t, exp)
	counters := metrics.NewIngestCounters("reservation-expiry.dlq")
	counters.Observe(1, 1, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- metrics.Serve(ctx, ln, metrics.Handler(metrics.NewRegistry(exp, counters))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after a cancel, want nil", err)
		}
	})
	base := "http://" + ln.Addr().String()
	body := get(t, base+"/metrics", http.StatusOK)
	if home := get(t, base+"/", http.StatusOK); !strings.Contains(string(home), "/metrics") {
		t.Errorf("/ says %q", home)
	}
	get(t, base+"/nothing", http.StatusNotFound)
	return body
}

func get(t *testing.T, url string, status int) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d", url, resp.Status, status)
	}
	return body
}

// TestAScrapePassesPromtool: names, types, units and help as Prometheus's
// own linter wants them, the runtime's and the process's metrics included.
func TestAScrapePassesPromtool(t *testing.T) {
	t.Parallel()
	body := serveFull(t)
	if !strings.Contains(string(body), "process_resident_memory_bytes") || !strings.Contains(string(body), "expiryctl_ingest_letters_total") {
		t.Fatalf("the scrape lacks the process's or the ingest's metrics:\n%s", body)
	}
	if out, err := promtooltest.Run(t, "", body, "check", "metrics"); err != nil || out != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestExporterBoundsTheRequestSeries: a backlog of open requests exports
// the newest 50 by id, not one series set per request ever left open.
func TestExporterBoundsTheRequestSeries(t *testing.T) {
	t.Parallel()
	snap := fakes.MetricsSnapshot()
	snap.Replay.OpenRequests = nil
	for id := int64(80); id > 0; id-- {
		snap.Replay.OpenRequests = append(snap.Replay.OpenRequests,
			metrics.RequestItems{ID: id, Status: "pending", States: map[string]int64{"pending": 1}})
	}
	exp, _, reg := setup(t, &fakes.MetricsSource{Snap: snap}, metrics.Options{})
	refresh(t, exp)
	got := gather(t, reg)
	var n int
	for k := range got {
		if strings.HasPrefix(k, "expiryctl_replay_request_items{") {
			n++
		}
	}
	_, newest := got[`expiryctl_replay_request_items{request="80",state="pending",status="pending"}`]
	_, oldest := got[`expiryctl_replay_request_items{request="30",state="pending",status="pending"}`]
	if n != 50 || !newest || oldest {
		t.Errorf("%d request series (newest present %v, the 50th from the top absent %v), want the newest 50", n, newest, !oldest)
	}
}
