package commands

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

// lossyIngester loses its broker on the first run, then captures and
// waits as a follow does, until the test ends it.
type lossyIngester struct {
	mu   sync.Mutex
	runs int
	stop context.CancelFunc
}

func (l *lossyIngester) Ingest(ctx context.Context, src deadletter.Source, opts deadletter.IngestOptions) (deadletter.IngestStats, error) {
	l.mu.Lock()
	l.runs++
	run := l.runs
	l.mu.Unlock()
	if run == 1 {
		return deadletter.IngestStats{}, deadletter.ErrSourceLost
	}
	stats := deadletter.IngestStats{Received: 4, Stored: 4, Batches: 1, Elapsed: time.Second}
	if err := src.Acknowledge(4); err != nil {
		return stats, err
	}
	opts.Progress(stats)
	l.stop()
	return stats, nil
}

func TestDLQIngestFollowReconnects(t *testing.T) {
	t.Parallel()
	f, _, errOut := testFactory(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ingester := &lossyIngester{stop: cancel}
	first, second := fakes.NewDLQSource(), fakes.NewDLQSource()
	opens := 0
	err := runCmdContext(ctx, NewCmdDLQIngest(f, func(ctx context.Context, o *DLQIngestOptions) error {
		o.Ingester = serve[service.Ingester](ingester)
		o.Source = func(string, int) (service.DLQSource, error) {
			opens++
			switch opens {
			case 1:
				return first, nil
			case 2:
				return nil, &broker.ConnectError{Address: "127.0.0.1:5672", Err: errors.New("connection refused")}
			}
			return second, nil
		}
		o.PingDB = func(context.Context) error { return nil }
		o.Backoff = func() retry.Backoff { return retry.NewConstant(time.Millisecond) }
		return dlqIngestRun(ctx, o)
	}), "--queue", "q.dlq", "--follow")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Closed || second.Acked != 4 || !second.Closed {
		t.Errorf("first closed %v; second acked through %d, closed %v", first.Closed, second.Acked, second.Closed)
	}
	lines := strings.Split(errOut.String(), "\n")
	want := []string{
		"lost RabbitMQ: the queue's consumer ended (connection lost or queue deleted); letters received and not committed were not acknowledged and go back to q.dlq; reconnecting in ",
		"RabbitMQ still unavailable after ",
		"reconnected to RabbitMQ after ",
		"interrupted: ingested 4 letters from q.dlq: 4 stored",
	}
	at := 0
	for _, line := range lines {
		if at < len(want) && strings.HasPrefix(line, want[at]) {
			at++
		}
	}
	if at < len(want) {
		t.Errorf("stderr lacks, in order, %q:\n%s", want[at], errOut)
	}
}

// TestFollowIngestCountsEachOutageOnce: an outage that takes two tries to
// reconnect is one loss for --metrics-listen's counter.
func TestFollowIngestCountsEachOutageOnce(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second := fakes.NewDLQSource()
	opens := 0
	opts := &DLQIngestOptions{IO: f.IO, Queue: "q.dlq", progress: newProgressLine(f.IO.ErrOut),
		Source: func(string, int) (service.DLQSource, error) {
			opens++
			if opens == 1 {
				return nil, &broker.ConnectError{Address: "127.0.0.1:5672", Err: errors.New("connection refused")}
			}
			return second, nil
		},
		PingDB:  func(context.Context) error { return nil },
		Backoff: func() retry.Backoff { return retry.NewConstant(time.Millisecond) },
	}
	var lost []string
	_, _, err := followIngest(ctx, opts, &lossyIngester{stop: cancel}, fakes.NewDLQSource(),
		deadletter.IngestOptions{Queue: "q.dlq", Follow: true}, 10, func(server string) { lost = append(lost, server) })
	if err != nil {
		t.Fatal(err)
	}
	if opens != 2 || len(lost) != 1 || lost[0] != "RabbitMQ" {
		t.Errorf("%d opens, losses counted %v; want 2 opens and one loss of RabbitMQ", opens, lost)
	}
}
