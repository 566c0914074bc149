package riverjobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestIngestCapturesRiverJobsOnceAndStops runs the archive's own ingest on
// a River source: the one-shot capture ends once every job is delivered,
// and a second capture of the same jobs stores nothing twice.
func TestIngestCapturesRiverJobsOnceAndStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	river := newRiverDB(t)
	archive := pgtest.New(t)
	acceptsRiver(t, archive.Pool)
	base := time.Now().Add(-time.Hour)
	for i := range 30 {
		river.seed(t, failedJob{FinalizedAt: base.Add(time.Duration(i) * time.Second)})
	}
	river.seed(t, failedJob{Args: `[1, 2]`, FinalizedAt: base.Add(time.Minute)})
	ref := river.ref(t, "expiry")
	before := river.tableDigest(t)

	for run, want := range []deadletter.IngestStats{{Received: 31, Stored: 31}, {Received: 31, Duplicates: 31}} {
		src := openSource(t, ref, riverjobs.SourceOptions{Prefetch: 10})
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		stats, err := deadletter.Ingest(runCtx, archive.Pool, src, deadletter.IngestOptions{Queue: src.QueueName(), Actor: "test", Batch: 7})
		cancel()
		_ = src.Close()
		if err != nil {
			t.Fatalf("ingest %d: %v", run+1, err)
		}
		if stats.Received != want.Received || stats.Stored != want.Stored || stats.Duplicates != want.Duplicates {
			t.Errorf("ingest %d: %+v; want received %d, stored %d, duplicates %d", run+1, stats, want.Received, want.Stored, want.Duplicates)
		}
	}
	var letters, malformed int
	if err := archive.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE reason_category = 'malformed')
		FROM expiryctl.dead_letters WHERE source_queue = $1 AND source_system = 'river'`, ref.Name()).Scan(&letters, &malformed); err != nil {
		t.Fatal(err)
	}
	if letters != 31 || malformed != 1 {
		t.Errorf("archive holds %d River letters, %d malformed; want 31 and 1", letters, malformed)
	}
	if river.tableDigest(t) != before {
		t.Error("ingest changed River's tables")
	}
}

// acceptsRiver fails t unless the archive knows River's letters: the
// migrate registers the drivers' systems in queue_systems.
func acceptsRiver(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, known, err := store.QueueSystemNamed(context.Background(), pool, riverjobs.System); err != nil || !known {
		t.Fatalf("the archive does not know the queue system %q (%v): its migrate registers it", riverjobs.System, err)
	}
}
