package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
)

// followBundle scripts the runs of a followed ingest: each run reports
// progress (when it commits) and ends with its error.
type followBundle struct {
	runs    []followRun
	opens   []error
	sources []*fakes.DLQSource
	reports []deadletter.Reconnect
	waits   []time.Duration
}

type followRun struct {
	committed int64
	err       error
}

func (b *followBundle) follow(t *testing.T, cancel context.CancelFunc) deadletter.FollowOptions {
	t.Helper()
	return deadletter.FollowOptions{
		Ingest: func(ctx context.Context, _ deadletter.Source, opts deadletter.IngestOptions) (deadletter.IngestStats, error) {
			if len(b.runs) == 0 {
				cancel()
				return deadletter.IngestStats{}, nil
			}
			run := b.runs[0]
			b.runs = b.runs[1:]
			stats := deadletter.IngestStats{Received: run.committed, Stored: run.committed, Batches: 1}
			if run.committed == 0 {
				stats = deadletter.IngestStats{}
			} else {
				opts.Progress(stats)
			}
			return stats, run.err
		},
		Open: func(context.Context) (deadletter.ClosableSource, error) {
			if len(b.opens) > 0 {
				err := b.opens[0]
				b.opens = b.opens[1:]
				if err != nil {
					return nil, err
				}
			}
			src := fakes.NewDLQSource()
			b.sources = append(b.sources, src)
			return src, nil
		},
		Backoff: func() retry.Backoff {
			return retry.WithCappedDuration(2*time.Second, retry.NewExponential(500*time.Millisecond))
		},
		Report: func(r deadletter.Reconnect) { b.reports = append(b.reports, r) },
		Sleep:  func(_ context.Context, d time.Duration) { b.waits = append(b.waits, d) },
		// The server a lost source is on, as its driver names it.
		Server: "RabbitMQ",
	}
}

func TestIngestFollowingWaitsOutLostServers(t *testing.T) {
	t.Parallel()
	lostDB := &deadletter.StoreError{Letters: 3, Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	brokerDown := &deadletter.Unavailable{Server: "RabbitMQ", Err: errors.New("connection refused")}
	b := &followBundle{
		runs: []followRun{
			{committed: 5, err: fmt.Errorf("%w; letters not yet stored stay in the queue", deadletter.ErrSourceLost)},
			{committed: 0, err: lostDB},
			{committed: 0, err: lostDB},
			{committed: 7},
		},
		opens: []error{brokerDown, brokerDown, nil},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := fakes.NewDLQSource()
	var last deadletter.IngestStats
	stats, open, err := deadletter.IngestFollowing(ctx, first, deadletter.IngestOptions{Follow: true,
		Progress: func(s deadletter.IngestStats) { last = s }}, b.follow(t, cancel))
	if err != nil {
		t.Fatal(err)
	}
	if stats.Stored != 12 || last.Stored != 12 || stats.Batches != 2 {
		t.Errorf("stats %+v, last progress %+v: want 12 stored over the runs, in 2 batches", stats, last)
	}
	if !first.Closed {
		t.Error("the lost source was not closed: what it received and did not commit would not be redelivered")
	}
	for i, src := range b.sources[:len(b.sources)-1] {
		if !src.Closed {
			t.Errorf("source %d, lost to PostgreSQL, was not closed", i+1)
		}
	}
	if open != b.sources[len(b.sources)-1] || open.(*fakes.DLQSource).Closed {
		t.Error("the source of the last run is not the one returned open")
	}
	// RabbitMQ: lost, 3 tries (2 refused), back; PostgreSQL: lost twice
	// (the waits growing on), back at the first commit.
	want := []struct {
		server  string
		attempt int
		back    bool
		next    time.Duration
	}{
		{"RabbitMQ", 1, false, 500 * time.Millisecond}, {"RabbitMQ", 2, false, time.Second}, {"RabbitMQ", 3, false, 2 * time.Second},
		{"RabbitMQ", 3, true, 0},
		{"PostgreSQL", 1, false, 500 * time.Millisecond}, {"PostgreSQL", 2, false, time.Second},
		{"PostgreSQL", 2, true, 0},
	}
	if len(b.reports) != len(want) {
		t.Fatalf("reports %+v, want %d", b.reports, len(want))
	}
	for i, w := range want {
		r := b.reports[i]
		if r.Server != w.server || r.Attempt != w.attempt || r.Back != w.back || r.Next != w.next || (r.Err == nil) == !w.back {
			t.Errorf("report %d: %+v, want %+v", i, r, w)
		}
	}
}

func TestIngestFollowingEndsOnWhatNoWaitCures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		run   error
		open  error
		tries int
	}{
		{"a refusal of PostgreSQL", &deadletter.StoreError{Letters: 1, Err: &pgconn.PgError{Code: "42501", Message: "permission denied"}}, nil, 0},
		{"a deleted queue", deadletter.ErrSourceLost, errors.New(`queue "q" does not exist on this broker`), 1},
		{"a bad classifier", errors.New("something else"), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &followBundle{runs: []followRun{{err: tc.run}}, opens: []error{tc.open}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, _, err := deadletter.IngestFollowing(ctx, fakes.NewDLQSource(), deadletter.IngestOptions{Follow: true}, b.follow(t, cancel))
			if err == nil {
				t.Fatal("the followed ingest went on")
			}
			if len(b.waits) != tc.tries {
				t.Errorf("%d waits, want %d", len(b.waits), tc.tries)
			}
		})
	}
}
