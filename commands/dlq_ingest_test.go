package commands

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/promtooltest"
	"github.com/expiryctl/expiryctl/internal/service"
)

// TestDLQIngestRun checks what `dlq ingest` asks of its services and how
// it reports; the capture itself (ack after commit, dedup, nothing
// dropped) is deadletter's, tested against PostgreSQL and RabbitMQ there
// and in e2e.
func TestDLQIngestRun(t *testing.T) {
	t.Parallel()
	type bundle struct {
		ingester *fakes.Ingester
		source   *fakes.DLQSource
		signer   *fakes.Signer
		queue    string
		prefetch int
		live     deadletter.QueueReport
		out      string
		errOut   string
	}
	ingestBeside := func(t *testing.T, live deadletter.QueueReport, args ...string) (*bundle, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		b := &bundle{live: live, ingester: &fakes.Ingester{Stats: deadletter.IngestStats{Stored: 2, Duplicates: 1, Elapsed: time.Second}},
			source: fakes.NewDLQSource(deadletter.Message{Body: []byte(`{}`)}, deadletter.Message{Body: []byte(`{}`)},
				deadletter.Message{Body: []byte(`{}`)}),
			signer: &fakes.Signer{}}
		err := runCmd(NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
			o.Ingester = serve[service.Ingester](b.ingester)
			o.Source = func(queue string, prefetch int) (service.DLQSource, error) {
				b.queue, b.prefetch = queue, prefetch
				return b.source, nil
			}
			o.Signer = serve[service.AuditSigner](b.signer)
			o.LiveQueues = serve[service.LiveQueues](&queueReport{report: b.live})
			return dlqIngestRun(ctx, o)
		}), args...)
		b.out, b.errOut = out.String(), errOut.String()
		return b, err
	}
	ingest := func(t *testing.T, args ...string) (*bundle, error) {
		t.Helper()
		return ingestBeside(t, deadletter.QueueReport{}, args...)
	}

	t.Run("a DLQ of classic queue version 1 gets the advice to move to 2", func(t *testing.T) {
		t.Parallel()
		live := deadletter.QueueReport{Queues: []deadletter.QueueState{
			{Name: "reservation-expiry.dlq", Role: deadletter.RoleDeadLetter, Ready: 3, ClassicVersion: 1}}}
		b, err := ingestBeside(t, live, "--queue", "reservation-expiry.dlq")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.errOut, "note: the DLQ reservation-expiry.dlq is a classic queue of version 1") ||
			!strings.Contains(b.errOut, `rabbitmqctl set_policy dlq-v2 '^reservation-expiry\.dlq$'`) {
			t.Fatalf("stderr %q, want the queue version advice first", b.errOut)
		}
		live.Queues[0].ClassicVersion = 2
		if b, err = ingestBeside(t, live, "--queue", "reservation-expiry.dlq"); err != nil || strings.Contains(b.errOut, "note:") {
			t.Fatalf("a DLQ of version 2: %v, stderr %q; want no advice", err, b.errOut)
		}
	})

	t.Run("drains the queue and says what it stored", func(t *testing.T) {
		t.Parallel()
		b, err := ingest(t, "--queue", "reservation-expiry.dlq", "--batch", "700")
		if err != nil {
			t.Fatal(err)
		}
		// Three batches must be allowed in flight: 3 × 700 beats --prefetch 1000.
		if b.queue != "reservation-expiry.dlq" || b.prefetch != 2100 {
			t.Fatalf("source opened on %q with prefetch %d, want 2100", b.queue, b.prefetch)
		}
		opts := b.ingester.Opts[0]
		if opts.Queue != "reservation-expiry.dlq" || opts.Batch != 700 || opts.Follow || opts.Classifier == nil {
			t.Fatalf("ingest options %+v", opts)
		}
		if b.source.Acked != 3 || !b.source.Closed {
			t.Fatalf("source acked through %d, closed %v", b.source.Acked, b.source.Closed)
		}
		if b.out != "" || !strings.HasPrefix(b.errOut, "capturing reservation-expiry.dlq until it is empty: 3 letters waiting\n"+
			"ingested 3 letters from reservation-expiry.dlq: 2 stored, 1 duplicate, in 1s") {
			t.Fatalf("stdout %q, stderr %q", b.out, b.errOut)
		}
	})
	t.Run("interrupted, it says what it left in the queue", func(t *testing.T) {
		t.Parallel()
		f, _, errOut := testFactory(t)
		source := fakes.NewDLQSource(deadletter.Message{Body: []byte(`{}`)})
		source.Requeued = 40
		ctx, cancel := context.WithCancel(context.Background())
		ingester := &fakes.Ingester{Stats: deadletter.IngestStats{Stored: 1}, Idle: make(chan struct{})}
		cmd := NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
			o.Ingester = serve[service.Ingester](ingester)
			o.Source = func(string, int) (service.DLQSource, error) { return source, nil }
			// Ctrl-C once the capture is under way.
			go cancel()
			return dlqIngestRun(ctx, o)
		})
		if err := runCmdContext(ctx, cmd, "--queue", "q", "--follow"); err != nil {
			t.Fatal(err)
		}
		got := errOut.String()
		for _, want := range []string{"capturing q until interrupted (Ctrl-C finishes the batch in hand): 1 letter waiting\n",
			"interrupted: ingested 1 letter from q: 1 stored, 0 duplicates",
			"40 letters left in q, none lost: capture them with `expiryctl dlq ingest --queue q`"} {
			if !strings.Contains(got, want) {
				t.Errorf("stderr lacks %q:\n%s", want, got)
			}
		}
	})
	t.Run("prefetch above three batches is kept", func(t *testing.T) {
		t.Parallel()
		b, err := ingest(t, "--queue", "q", "--batch", "10", "--prefetch", "64")
		if err != nil || b.prefetch != 64 {
			t.Fatalf("prefetch %d (%v), want 64", b.prefetch, err)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		b, err := ingest(t, "--queue", "q", "-o", "json")
		var got map[string]any
		if err != nil || json.Unmarshal([]byte(b.out), &got) != nil || got["queue"] != "q" || got["received"] != 3.0 ||
			got["stored"] != 2.0 || got["duplicates"] != 1.0 || got["seconds"] != 1.0 {
			t.Fatalf("json = %v, %v:\n%s", got, err, b.out)
		}
	})
	t.Run("an unreadable classes file is a flag error before any connection", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		err := runCmd(NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
			o.Ingester = never[service.Ingester](t, "the ingester")
			return dlqIngestRun(ctx, o)
		}), "--queue", "q", "--classes", filepath.Join(t.TempDir(), "missing.json"))
		wantExit(t, err, ExitUsage)
	})
	t.Run("--follow with a key signs checkpoints meanwhile", func(t *testing.T) {
		t.Parallel()
		key := filepath.Join(t.TempDir(), "audit.key")
		if err := os.WriteFile(key, []byte("PRIVATE+KEY+test"), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := ingest(t, "--queue", "q", "--follow", "--checkpoint-key", key, "--checkpoint-every", "1m")
		if err != nil {
			t.Fatal(err)
		}
		if !b.ingester.Opts[0].Follow {
			t.Fatal("ingest did not follow")
		}
		// The signer runs on its own goroutine.
		deadline := time.Now().Add(5 * time.Second)
		for {
			keys, every := b.signer.Calls()
			if len(keys) == 1 {
				if keys[0] != "PRIVATE+KEY+test" || every[0] != time.Minute {
					t.Fatalf("signed with %q every %v", keys[0], every[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no checkpoint signer was started")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("--metrics-listen is for --follow", func(t *testing.T) {
		t.Parallel()
		_, err := ingest(t, "--queue", "q", "--metrics-listen", "127.0.0.1:0")
		wantExit(t, err, ExitUsage)
	})
	t.Run("--follow --metrics-listen serves the archive's metrics and the capture's counters", func(t *testing.T) {
		t.Parallel()
		f, errOut := servingFactory(t)
		idle := make(chan struct{})
		ingester := &fakes.Ingester{Stats: deadletter.IngestStats{Stored: 2, Duplicates: 1, Batches: 1}, Idle: idle}
		source := &fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}
		recorder := &fakes.Recorder{}
		var workQueue string
		cmd := NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
			o.Ingester = serve[service.Ingester](ingester)
			o.Source = func(string, int) (service.DLQSource, error) {
				return fakes.NewDLQSource(deadletter.Message{Body: []byte(`{}`)}), nil
			}
			o.MetricsSource = func(_ context.Context, q string) (metrics.Source, error) { workQueue = q; return source, nil }
			o.Recorder = serve[service.Recorder](recorder)
			return dlqIngestRun(ctx, o)
		})
		s := startServing(t, errOut, func(ctx context.Context) error {
			return runCmdContext(ctx, cmd, "--queue", "reservation-expiry.dlq", "--follow", "--metrics-listen", "127.0.0.1:0")
		})
		// The counters move after the batch commits, which follows the
		// start of the server.
		var got map[string]float64
		deadline := time.Now().Add(10 * time.Second)
		for {
			got = promtooltest.Samples(t, scrape(t, s.url))
			if got[`expiryctl_ingest_letters_total{outcome="stored",queue="reservation-expiry.dlq"}`] == 2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		want := map[string]float64{
			`expiryctl_ingest_letters_total{outcome="stored",queue="reservation-expiry.dlq"}`:    2,
			`expiryctl_ingest_letters_total{outcome="duplicate",queue="reservation-expiry.dlq"}`: 1,
			`expiryctl_ingest_batches_total{queue="reservation-expiry.dlq"}`:                     1,
			`expiryctl_dead_letters_waiting{category="transient-exhausted"}`:                     12,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		if workQueue != "reservation-expiry" {
			t.Errorf("metrics read for work queue %q", workQueue)
		}
		if n := len(recorder.Recorded()); n != 1 {
			t.Errorf("%d audit rows for the metrics, want 1", n)
		}
		close(idle)
		if err := <-s.done; err != nil {
			t.Fatalf("ingest ended with %v", err)
		}
		if _, err := http.Get(s.url); err == nil {
			t.Error("the metrics are still served after ingest ended")
		}
	})
	t.Run("an unreadable key stops before ingesting", func(t *testing.T) {
		t.Parallel()
		b, err := ingest(t, "--queue", "q", "--follow", "--checkpoint-key", filepath.Join(t.TempDir(), "none"))
		if err == nil || !strings.Contains(err.Error(), "cannot read --checkpoint-key") {
			t.Fatalf("error = %v", err)
		}
		if len(b.ingester.Opts) != 0 || !b.source.Closed {
			t.Fatalf("ingested %d times; source closed %v", len(b.ingester.Opts), b.source.Closed)
		}
	})
}
