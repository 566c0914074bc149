package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// downBundle is one subtest's database, DLQ of published letters and cli.
type downBundle struct {
	db        *pgtest.Database
	observer  *pgxpool.Pool
	r         *rabbit
	dlq       string
	c         *cli
	published int
}

func setupDown(t *testing.T, letters int) *downBundle {
	t.Helper()
	db := pgtest.New(t)
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	r.publish(t, dlq, workerLetters(0, letters, "db_timeout", "i/o timeout")...)
	return &downBundle{db: db, observer: observerPool(t, db.URL), r: r, dlq: dlq, c: newCLI(db.URL, "e2e-pg-down"), published: letters}
}

// observerPool connects the test under an application_name of its own:
// expiryctl names its connections "expiryctl", and the test must be able to
// terminate those without terminating itself.
func observerPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "expiryctl-e2e-observer"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// recover checks that once PostgreSQL is healthy again, a plain ingest
// captures everything the failed run left behind, each letter once.
func (b *downBundle) recover(t *testing.T) {
	t.Helper()
	b.c.ok(t, "dlq", "ingest", "--queue", b.dlq)
	if left := b.r.settled(t, b.dlq); left != 0 {
		t.Errorf("%d letters left in the queue after the recovery ingest, want 0", left)
	}
	if n := count(t, b.observer, "SELECT count(DISTINCT message_id) FROM expiryctl.dead_letters"); n != b.published {
		t.Errorf("%d distinct letters archived after recovery, want all %d", n, b.published)
	}
	if n := rows(t, b.observer); n != b.published {
		t.Errorf("%d rows archived after recovery, want %d", n, b.published)
	}
}

// TestIngestPostgresDownMidway makes PostgreSQL fail in the middle of a
// capture, in ways confined to the test's own database. Ingest must stop with
// a non-zero exit and a message that says what happened, and must not have
// acknowledged a single letter it did not store.
func TestIngestPostgresDownMidway(t *testing.T) {
	t.Parallel()

	t.Run("insert refused after 500 rows", func(t *testing.T) {
		t.Parallel()
		b := setupDown(t, 1200)
		// A volatile function sees the rows its own statement inserted (and
		// those committed), so a batch that would cross 500 fails as a whole.
		// Ingest writes two batches at once, and two concurrent batches may
		// each see fewer than 500 committed, so up to one more batch lands.
		_, err := b.observer.Exec(withTimeout(t), `
			CREATE FUNCTION expiryctl.e2e_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF (SELECT count(*) FROM expiryctl.dead_letters) >= 500 THEN
					RAISE EXCEPTION 'could not extend file: No space left on device (simulated by e2e)';
				END IF;
				RETURN NEW;
			END $$;
			CREATE TRIGGER e2e_disk_full BEFORE INSERT ON expiryctl.dead_letters
				FOR EACH ROW EXECUTE FUNCTION expiryctl.e2e_disk_full();`)
		if err != nil {
			t.Fatal(err)
		}
		res := b.c.run(t, "dlq", "ingest", "--queue", b.dlq, "--batch", "100")
		if res.code != 1 {
			t.Fatalf("want exit 1 when PostgreSQL refuses a batch: %s", res)
		}
		for _, s := range []string{"No space left on device", "none of them was acknowledged", "stay in the queue"} {
			if !strings.Contains(res.stderr, s) {
				t.Errorf("the error should say %q: %s", s, res)
			}
		}
		// Batches are of 100 unless the linger timer flushed a shorter one,
		// so the limit lands within a batch either side of 500. Each batch
		// commits with its own dlq.ingest.batch audit row, so the rows those
		// record are the rows stored if and only if no batch was stored in
		// part.
		stored, queued := rows(t, b.observer), b.r.settled(t, b.dlq)
		inBatches := count(t, b.observer, `SELECT coalesce(sum((details->>'stored')::int), 0) FROM expiryctl.audit_log
			WHERE action = 'dlq.ingest.batch'`)
		// A batch that committed after an earlier one failed is not acked
		// (acks are cumulative, in order): its copies stay queued, to be
		// skipped as duplicates when redelivered. How many such batches
		// there are depends on how the two writers were scheduled (one may
		// stall on a batch while the other commits several), so the bound
		// is that every letter is stored or queued, none neither, and no
		// more are queued than were published.
		if stored <= 400 || stored > 600 || stored != inBatches || stored+queued < b.published || queued > b.published {
			t.Errorf("%d stored (%d by the batches' audit rows) + %d queued, want 401 to 600 stored in whole batches and the other %d queued: every letter not stored must still be queued",
				stored, inBatches, queued, b.published-stored)
		}
		if n := count(t, b.observer, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest' AND outcome = 'error'`); n != 1 {
			t.Errorf("the failed run should leave one dlq.ingest audit row with outcome error, found %d", n)
		}

		if _, err := b.observer.Exec(withTimeout(t), `DROP TRIGGER e2e_disk_full ON expiryctl.dead_letters`); err != nil {
			t.Fatal(err)
		}
		b.recover(t)
	})

	t.Run("connections terminated", func(t *testing.T) {
		t.Parallel()
		b := setupDown(t, 3000)
		p := b.c.start(t, "dlq", "ingest", "--queue", b.dlq, "--batch", "100")
		waitFor(t, 30*time.Second, "ingest to store 200 letters", func() bool {
			return rows(t, b.observer) >= 200 || p.exited()
		})
		// What an operator sees when the primary restarts or a pooler drops
		// connections: every expiryctl backend of this database dies, again
		// and again, until ingest gives up.
		terminated := 0
		ctx := withTimeout(t)
		deadline := time.Now().Add(runTimeout)
		for !p.exited() && time.Now().Before(deadline) {
			var n int
			err := b.observer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = $1 AND application_name = 'expiryctl' AND pid <> pg_backend_pid()`, b.db.Name).Scan(&n)
			if err != nil {
				t.Fatalf("terminate expiryctl's backends: %v", err)
			}
			terminated += n
			time.Sleep(2 * time.Millisecond)
		}
		res := p.wait(10 * time.Second)
		t.Logf("terminated %d backends; %s", terminated, res)
		if res.code == 0 {
			t.Fatalf("ingest exited 0 although its connections were terminated mid-capture: %s", res)
		}
		if !strings.Contains(res.stderr, "error:") || !strings.Contains(res.stderr, "terminat") {
			t.Errorf("the error should say the connection was terminated: %s", res)
		}
		stored, queued := rows(t, b.observer), b.r.settled(t, b.dlq)
		if stored+queued < b.published {
			t.Errorf("%d stored + %d queued < %d published: letters were acknowledged without being stored",
				stored, queued, b.published)
		}
		// A connection terminated during COMMIT can leave a batch committed
		// but unacknowledged; the recovery ingest skips those copies.
		t.Logf("%d stored + %d queued of %d published", stored, queued, b.published)
		b.recover(t)
	})

	t.Run("backlog beyond the prefetch window", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name    string
			letters int
			args    []string
		}{
			// 1000 letters are held unacked by the default prefetch window,
			// and the 1500 behind them keep the queue from looking empty.
			{"drain", 3000, nil},
			{"follow", 300, []string{"--follow"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setupDown(t, tc.letters)
				if _, err := b.observer.Exec(withTimeout(t), `
					CREATE FUNCTION expiryctl.e2e_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'read-only transaction (simulated by e2e)'; END $$;
					CREATE TRIGGER e2e_refuse BEFORE INSERT ON expiryctl.dead_letters
						FOR EACH ROW EXECUTE FUNCTION expiryctl.e2e_refuse();`); err != nil {
					t.Fatal(err)
				}
				p := b.c.start(t, append([]string{"dlq", "ingest", "--queue", b.dlq, "--batch", "100"}, tc.args...)...)
				res := p.wait(30 * time.Second)
				if res.code != 1 || !strings.Contains(res.stderr, "read-only transaction") {
					t.Errorf("want exit 1 naming the refused batch: %s", res)
				}
				if queued := b.r.settled(t, b.dlq); queued != b.published {
					t.Errorf("%d letters queued after the failed run, want all %d", queued, b.published)
				}
			})
		}
	})
}
