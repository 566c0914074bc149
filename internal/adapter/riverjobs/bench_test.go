package riverjobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// benchJobs is how many jobs a benchmark reads or retries per round.
const benchJobs = 1000

// seedMany discards n jobs at once, each with a two-attempt history and
// the contract's args, finalized a millisecond apart.
func (db *riverDB) seedMany(b *testing.B, n int) {
	b.Helper()
	exec(b, db, `INSERT INTO river_job (state, attempt, max_attempts, attempted_at, finalized_at, args, attempted_by, errors, kind, queue)
		SELECT 'discarded', 2, 2, f, f,
			jsonb_build_object('reservation_id', 'r-' || i, 'idempotency_key', 'expire:r-' || i || ':v1', 'expected_version', 3),
			'{host-1}',
			ARRAY[jsonb_build_object('at', f, 'attempt', 1, 'error', 'db_timeout: first', 'trace', 'goroutine 1 [running]:'),
			      jsonb_build_object('at', f, 'attempt', 2, 'error', 'db_timeout: last', 'trace', '')],
			'reservation_expiry', 'expiry'
		FROM generate_series(1, $1) AS i, LATERAL (SELECT now() - interval '1 hour' + i * interval '1 millisecond' AS f) AS t`, n)
}

// BenchmarkSourceRead reads benchJobs discarded jobs through a Source, as
// the ingest does, and the same rows with one bare SELECT of the same
// columns; ratio is the source's time over the bare read's.
func BenchmarkSourceRead(b *testing.B) {
	db := newRiverDB(b)
	db.seedMany(b, benchJobs)
	ref := db.ref(b, "expiry")
	ctx := context.Background()
	var viaSource, bare time.Duration
	for b.Loop() {
		start := time.Now()
		src, err := riverjobs.OpenSource(ctx, ref, riverjobs.SourceOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for range benchJobs {
			d := <-src.Deliveries()
			if d.Tag%500 == 0 {
				_ = src.Acknowledge(d.Tag)
			}
		}
		_ = src.Close()
		viaSource += time.Since(start)

		start = time.Now()
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			b.Fatal(err)
		}
		rows, err := conn.Query(ctx, `SELECT id, kind, args, attempt, max_attempts, errors, finalized_at, queue, state::text,
			priority, created_at, scheduled_at, attempted_at, tags, metadata, attempted_by, unique_key
			FROM river_job WHERE state = 'discarded' AND queue = 'expiry' ORDER BY finalized_at, id`)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if rows.Err() != nil || n != benchJobs {
			b.Fatalf("bare read: %d rows, %v", n, rows.Err())
		}
		_ = conn.Close(ctx)
		bare += time.Since(start)
	}
	b.ReportMetric(float64(viaSource.Nanoseconds())/float64(b.N*benchJobs), "source-ns/job")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N*benchJobs), "bare-ns/job")
	b.ReportMetric(float64(viaSource)/float64(bare), "ratio")
}

// BenchmarkRetrier retries benchJobs discarded jobs through a Retrier (8
// at once, and one at a time), and through a bare loop of River's
// JobRetry; the ratios are each retrier's time over the loop's.
func BenchmarkRetrier(b *testing.B) {
	db := newRiverDB(b)
	db.seedMany(b, benchJobs)
	ref := db.ref(b, "expiry")
	ctx := context.Background()
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	retriers := map[int]*riverjobs.Retrier{}
	for _, c := range []int{1, 8} {
		r, err := riverjobs.OpenRetrier(ctx, ref, riverjobs.RetrierOptions{Concurrency: c})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close() })
		retriers[c] = r
	}
	request := int64(0)
	var took [3]time.Duration // retrier 8, retrier 1, bare loop
	for b.Loop() {
		for i, c := range []int{8, 1} {
			b.StopTimer()
			msgs := db.discardAgain(b, ref)
			request++
			b.StartTimer()
			start := time.Now()
			pending := make([]replay.Pending, len(msgs))
			for j, m := range msgs {
				m.Headers[replay.HeaderReplayRequest] = request
				if pending[j], err = retriers[c].Publish(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			for j, p := range pending {
				<-p.Done()
				if err := p.Outcome(); err != nil {
					b.Fatalf("retry %d: %v", j, err)
				}
			}
			took[i] += time.Since(start)
		}
		b.StopTimer()
		msgs := db.discardAgain(b, ref)
		b.StartTimer()
		start := time.Now()
		for _, m := range msgs {
			if _, err := client.JobRetry(ctx, parseID(b, m.Job.ID)); err != nil {
				b.Fatal(err)
			}
		}
		took[2] += time.Since(start)
	}
	perJob := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*benchJobs) }
	b.ReportMetric(perJob(took[0]), "retrier8-ns/job")
	b.ReportMetric(perJob(took[1]), "retrier1-ns/job")
	b.ReportMetric(perJob(took[2]), "bare-ns/job")
	b.ReportMetric(float64(took[0])/float64(took[2]), "ratio8")
	b.ReportMetric(float64(took[1])/float64(took[2]), "ratio1")
}

// discardAgain puts every job of the queue back in state discarded with
// a fresh finalized_at, as if each failed again, and returns the replay
// message of each.
func (db *riverDB) discardAgain(b *testing.B, ref riverjobs.Ref) []replay.Message {
	b.Helper()
	rows, err := db.Pool.Query(context.Background(), `UPDATE river_job SET state = 'discarded', attempt = 2, max_attempts = 2,
		finalized_at = clock_timestamp(), metadata = '{}' WHERE queue = 'expiry' RETURNING id, finalized_at`)
	if err != nil {
		b.Fatal(err)
	}
	var msgs []replay.Message
	for rows.Next() {
		var id int64
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, replay.Message{Item: id, RoutingKey: ref.Name(), System: riverjobs.System,
			Headers: map[string]any{replay.HeaderReplayItem: id, replay.HeaderReplayedBy: "bench"},
			Job:     replay.JobRef{ID: fmt.Sprint(id), Incarnation: riverjobs.Incarnation(at)}})
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	return msgs
}
