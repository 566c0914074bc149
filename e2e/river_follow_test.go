package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// TestRiverFollowRidesOutARestart runs `dlq ingest --follow` on a River
// queue whose database, on a PostgreSQL cluster of the test's own, stops
// and starts again under it: the capture goes on, stores the jobs River
// discarded before, during and after the outage once each, and ends
// cleanly on an interrupt. The machine's PostgreSQL is never restarted.
func TestRiverFollowRidesOutARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := servers.StartPostgreSQL(t)
	admin, err := pgx.Connect(ctx, pg.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE river"); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close(ctx)
	riverURL := pgtest.WithDatabase(pg.AdminURL, "river")
	pool, err := pgxpool.New(ctx, riverURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	// discard inserts n jobs as River leaves a job it discarded.
	next := 0
	discard := func(n int) {
		t.Helper()
		for range n {
			next++
			args := fmt.Sprintf(`{"reservation_id": "r-follow-%d", "idempotency_key": "expire:r-follow-%d:v1"}`, next, next)
			if _, err := pool.Exec(ctx, `INSERT INTO river_job (state, attempt, max_attempts, attempted_at, finalized_at, scheduled_at,
				args, attempted_by, errors, kind, metadata, queue, tags)
				VALUES ('discarded', 2, 2, now(), now(), now(), $1::jsonb, '{host-1}',
					ARRAY[jsonb_build_object('at', now(), 'attempt', 2, 'error', 'deadlock detected', 'trace', '')], 'reservation_expiry', '{}', 'expiry', '{}')`,
				args); err != nil {
				t.Fatal(err)
			}
		}
	}
	discard(3)

	db := pgtest.New(t)
	ingester := newCLI(db.Login(t, "ingester", "expiryctl_ingester").URL, "")
	queue := fmt.Sprintf("river://postgres@127.0.0.1:%d/river/expiry", pg.Port)
	p := ingester.start(t, "dlq", "ingest", "--queue", queue, "--follow")
	stored := func() int { return count(t, db.Pool, `SELECT count(*) FROM expiryctl.dead_letters`) }
	waitFor(t, 30*time.Second, "the first 3 jobs", func() bool { return stored() == 3 })

	pg.Stop(t)
	time.Sleep(2 * time.Second)
	pg.Start(t)
	pool.Reset()
	discard(4)
	waitFor(t, 60*time.Second, "the 4 jobs discarded after the restart", func() bool { return stored() == 7 })
	if p.exited() {
		t.Fatalf("the capture ended with the outage: %s", p.wait(time.Second))
	}
	p.signal(syscall.SIGINT)
	res := p.wait(30 * time.Second)
	if res.code != 0 {
		t.Fatalf("an interrupted capture should end cleanly: %s", res)
	}
	if strings.Contains(res.stderr, "postgres@") {
		t.Errorf("the capture printed the River login: %s", res.stderr)
	}
	if got := count(t, db.Pool, `SELECT count(DISTINCT native->>'job_id') FROM expiryctl.dead_letters`); got != 7 {
		t.Errorf("%d distinct jobs stored, want 7", got)
	}
}
