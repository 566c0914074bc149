package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sync/errgroup"
)

// The replay floor is the least a replay that keeps its items in
// PostgreSQL can do: read a chunk of items with their letters, mark the
// chunk publishing in one statement and commit, publish it through the
// runner's confirm window, and record the confirms set-wise (the item
// confirmed, the letter replayed), committed in batches. It checks no
// role, clears no send, runs no trigger and keeps one index a table, so
// its PostgreSQL CPU an item is the floor of the runner's, and its
// arriving rate against the broker limit says how much of that limit the
// cores leave any such replay on this machine.

// replayFloorChunk is the runner's window of items read at once;
// replayFloorRecord about what its recorder writes a commit at these rates
// (up to 1,000 answers, every 100 ms).
const (
	replayFloorChunk  = 1000
	replayFloorRecord = 500
)

// replayFloorSetup makes the floor's tables in the benchmark database: for
// each of rounds runs, n items over the archive's letters (the next n
// each run, from the first again where the archive ends) and a state row
// for each of the run's letters.
func replayFloorSetup(ctx context.Context, pool *pgxpool.Pool, n, rounds int) error {
	_, err := pool.Exec(ctx, `
		CREATE SCHEMA bench_floor;
		CREATE TABLE bench_floor.items (
			run integer NOT NULL, ordinal integer NOT NULL, dead_letter_id bigint NOT NULL,
			state text NOT NULL DEFAULT 'pending', confirmed_at timestamptz,
			PRIMARY KEY (run, ordinal)) WITH (fillfactor = 50);
		CREATE TABLE bench_floor.states (run integer, dead_letter_id bigint, status text NOT NULL, PRIMARY KEY (run, dead_letter_id))`)
	if err != nil {
		return fmt.Errorf("create the replay floor's tables: %w", err)
	}
	_, err = pool.Exec(ctx, `
		WITH l AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM expiryctl.dead_letters),
		     i AS (SELECT 1 + g / $1::integer AS run, 1 + g % $1::integer AS ordinal, g FROM generate_series(0, $1::integer * $2::integer - 1) g)
		INSERT INTO bench_floor.items (run, ordinal, dead_letter_id)
		SELECT i.run, i.ordinal, l.id FROM i JOIN l ON l.k = i.g % (SELECT count(*) FROM expiryctl.dead_letters)`,
		n, rounds)
	if err != nil {
		return fmt.Errorf("fill the replay floor's items: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO bench_floor.states SELECT run, dead_letter_id, 'in_request' FROM bench_floor.items`); err != nil {
		return fmt.Errorf("fill the replay floor's states: %w", err)
	}
	for _, t := range []string{"bench_floor.items", "bench_floor.states"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	return nil
}

// replayFloorRun replays run's n items as the floor does, publishing
// template (the runner's message for each item, its body the letter's
// payload as read) to exchange with key, and returns the arriving rate at
// queue on the destination clock and the CPU the run took.
func replayFloorRun(ctx context.Context, conn *amqp.Connection, pool *pgxpool.Pool, run, n int, exchange, key, queue string,
	template []amqp.Publishing) (arriving float64, use cpuUse, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, use, err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return 0, use, err
	}
	clock, err := startDestinationClock(conn, queue, n)
	if err != nil {
		return 0, use, err
	}
	defer clock.stop()

	type chunk struct {
		ids  []int64
		msgs []amqp.Publishing
	}
	chunks := make(chan chunk, 1)
	confirmed := make(chan []int64, n/replayFloorRecord+1)
	cpu := startCPU()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(chunks)
		for lo := 1; lo <= n; lo += replayFloorChunk {
			hi := lo + replayFloorChunk - 1
			rows, err := pool.Query(gctx, `
				SELECT d.id, d.payload FROM bench_floor.items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
				 WHERE i.run = $1 AND i.ordinal BETWEEN $2 AND $3 ORDER BY i.ordinal`, run, lo, hi)
			if err != nil {
				return err
			}
			type letter struct {
				ID      int64
				Payload []byte
			}
			letters, err := pgx.CollectRows(rows, pgx.RowToStructByPos[letter])
			if err != nil {
				return err
			}
			var c chunk
			for k, l := range letters {
				m := template[lo-1+k]
				m.Body = l.Payload
				c.ids, c.msgs = append(c.ids, l.ID), append(c.msgs, m)
			}
			tag, err := pool.Exec(gctx, `UPDATE bench_floor.items SET state = 'publishing'
				 WHERE run = $1 AND ordinal BETWEEN $2 AND $3 AND dead_letter_id = ANY ($4) AND state = 'pending'`, run, lo, hi, c.ids)
			if err != nil {
				return err
			}
			if int(tag.RowsAffected()) != len(c.ids) {
				return fmt.Errorf("replay floor: marked %d of %d items", tag.RowsAffected(), len(c.ids))
			}
			select {
			case chunks <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for ids := range confirmed {
			err := pgx.BeginFunc(gctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(gctx, `UPDATE bench_floor.items SET state = 'confirmed', confirmed_at = now()
					 WHERE run = $1 AND dead_letter_id = ANY ($2) AND state = 'publishing'`, run, ids); err != nil {
					return err
				}
				_, err := tx.Exec(gctx, `UPDATE bench_floor.states SET status = 'replayed'
					 WHERE run = $1 AND dead_letter_id = ANY ($2) AND status = 'in_request'`, run, ids)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		defer close(confirmed)
		type sent struct {
			dc *amqp.DeferredConfirmation
			id int64
		}
		window := make([]sent, 0, replayBenchWindow)
		batch := make([]int64, 0, replayFloorRecord)
		settle := func() error {
			ok, err := window[0].dc.WaitContext(gctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("replay floor: the broker nacked item %d", window[0].id)
			}
			batch = append(batch, window[0].id)
			window = window[1:]
			if len(batch) == replayFloorRecord {
				confirmed <- batch
				batch = make([]int64, 0, replayFloorRecord)
			}
			return nil
		}
		for c := range chunks {
			for i, m := range c.msgs {
				for len(window) >= replayBenchWindow {
					if err := settle(); err != nil {
						return err
					}
				}
				dc, err := ch.PublishWithDeferredConfirmWithContext(gctx, exchange, key, true, false, m)
				if err != nil {
					return err
				}
				window = append(window, sent{dc, c.ids[i]})
			}
		}
		for len(window) > 0 {
			if err := settle(); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			confirmed <- batch
		}
		return nil
	})
	err = g.Wait()
	use = cpu.Stop()
	if err != nil {
		return 0, use, fmt.Errorf("replay floor: %w", err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bench_floor.items WHERE run = $1 AND state <> 'confirmed'`, run).Scan(&left); err != nil {
		return 0, use, err
	}
	if left > 0 {
		return 0, use, fmt.Errorf("replay floor: %d of %d items left unconfirmed", left, n)
	}
	if arriving, err = clock.rate(ctx, time.Minute); err != nil {
		return 0, use, err
	}
	if err := replayBenchExpectDepth(conn, queue, n); err != nil {
		return 0, use, err
	}
	replayBenchPurge(conn, queue)
	return arriving, use, nil
}
