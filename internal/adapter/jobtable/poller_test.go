package jobtable_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/replay"
)

// poller is the team's own worker, as small as one can be: workers take
// the oldest due pending job with SELECT … FOR UPDATE SKIP LOCKED, and
// fail it for good until told to succeed, when they record it as
// processed (with no constraint that would hide a second processing).
type poller struct {
	db      *jobsDB
	succeed atomic.Bool
	wg      sync.WaitGroup
}

func startPoller(t *testing.T, db *jobsDB, workers int) *poller {
	t.Helper()
	db.exec(t, `CREATE TABLE public.processed (job_id bigint NOT NULL, idempotency_key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	p := &poller{db: db}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); p.wg.Wait() })
	for range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for ctx.Err() == nil {
				worked, err := p.once(ctx)
				if err != nil && ctx.Err() == nil {
					t.Errorf("poller: %v", err)
					return
				}
				if !worked {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	return p
}

func (p *poller) once(ctx context.Context) (bool, error) {
	tx, err := p.db.Admin.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var id int64
	var key string
	err = tx.QueryRow(ctx, `SELECT id, idempotency_key FROM public.reservation_expiry_jobs
		WHERE status = 'pending' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.succeed.Load() {
		if _, err := tx.Exec(ctx, `INSERT INTO public.processed (job_id, idempotency_key) VALUES ($1, $2)`, id, key); err != nil {
			return false, err
		}
		_, err = tx.Exec(ctx, `UPDATE public.reservation_expiry_jobs SET status = 'done', attempt_count = attempt_count + 1 WHERE id = $1`, id)
	} else {
		_, err = tx.Exec(ctx, `UPDATE public.reservation_expiry_jobs SET status = 'failed', attempt_count = attempt_count + 1,
			last_error = 'db_timeout: canceling statement due to statement timeout', failed_at = clock_timestamp() WHERE id = $1`, id)
	}
	if err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// waitFor polls the table until cond's count is n.
func waitFor(t *testing.T, db *jobsDB, what, countSQL string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := db.Admin.QueryRow(context.Background(), countSQL).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d", what, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplayedRowsAreProcessedOnce runs a real poller: every job fails,
// is captured, the poller is fixed, and a replay puts every job back,
// each item published twice as a resumed run would, racing the poller
// working them; a second request for the same jobs finds them moved on.
// Each job is processed exactly once.
func TestReplayedRowsAreProcessedOnce(t *testing.T) {
	t.Parallel()
	const n = 40
	db := newJobsDB(t, "jsonb")
	p := startPoller(t, db, 4)
	for range n {
		db.insert(t, job{Status: "pending"})
	}
	waitFor(t, db, "jobs failed", `SELECT count(*) FROM public.reservation_expiry_jobs WHERE status = 'failed'`, n)

	letters := capture(t, db, n)
	p.succeed.Store(true)
	r := openRetrier(t, db.URL, db.Mapping)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fails []error
	)
	item := int64(0)
	for _, l := range letters {
		item++
		for range 2 {
			wg.Add(1)
			go func(m replay.Message) {
				defer wg.Done()
				if err := publish(t, r, m); err != nil {
					mu.Lock()
					fails = append(fails, err)
					mu.Unlock()
				}
			}(replayOf(l, 100, item))
		}
	}
	wg.Wait()
	for _, err := range fails {
		t.Errorf("a publish of the replay: %v", err)
	}
	waitFor(t, db, "jobs done", `SELECT count(*) FROM public.reservation_expiry_jobs WHERE status = 'done'`, n)

	// Another request for the same letters, after the jobs ran.
	item = 0
	for _, l := range letters {
		item++
		var moved *replay.JobMovedOnError
		if err := publish(t, r, replayOf(l, 101, item)); !errors.As(err, &moved) {
			t.Errorf("request 101 for job %s: %v; want it skipped", l.MessageID, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // time for a wrong second run to show
	var processed, distinct int
	if err := db.Admin.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT job_id) FROM public.processed`).Scan(&processed, &distinct); err != nil {
		t.Fatal(err)
	}
	if processed != n || distinct != n {
		t.Errorf("processed %d times, %d distinct jobs; want each of %d once", processed, distinct, n)
	}
	for id := range letters {
		if got := db.row(t, id); got.Marks["x-replay-request"] != float64(100) {
			t.Errorf("job %s: marks %v", id, got.Marks)
		}
	}
	if depth, _, err := r.QueueDepth(context.Background(), r.QueueName()); err != nil || depth != 0 {
		t.Errorf("QueueDepth once all ran = %d, %v", depth, err)
	}
}
