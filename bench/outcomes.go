package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/replay"
)

// outcomesBenchQuery is the outcome query of the scenario: one index
// lookup per item in a table where every reservation is already terminal,
// so that each item costs the watcher what a real lookup costs and is
// decided at its first poll.
const outcomesBenchQuery = `SELECT terminal_at, false FROM bench_reservations.outcomes WHERE reservation_id = $1`

// benchOutcomes is the outcomes scenario (issue 14): replay.Runner replays
// N letters (50k, -quick 10k) at an unlimited rate with the policy's
// outcome query set, against the same runner with none (target ≥ 0.9×).
// Each side is timed end to end, from the Run call to its return, so the
// watched side pays for everything watching adds: the batched polls during
// the run and the wait at its end until every outcome is known. The sides
// take turns (three rounds each, -quick one) and each is represented by
// its median.
func benchOutcomes(ctx context.Context, cfg *config, rep *report) error {
	n, rounds := 50_000, 3
	switch {
	case cfg.Smoke:
		n, rounds = 1_000, 1
	case cfg.Quick:
		n, rounds = 10_000, 1
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %6.1fs  outcomes: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	adminURL := firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	amqpURL := firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_AMQP_URL"), os.Getenv("EXPIRYCTL_AMQP_URL"), broker.DefaultURL)

	conn, err := broker.Dial(amqpURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	prefix := "expiryctl-bench-outcomes-" + randomSuffix()
	exchange, queue := prefix+".x", prefix+".subject"
	if err := replayBenchTopology(conn, exchange, []string{queue}); err != nil {
		return err
	}
	defer func() {
		deleteQueues(amqpURL, queue, replayBenchDLQ(exchange))
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(exchange, false, false)
			_ = ch.Close()
		}
	}()
	db, err := createDB(ctx, adminURL, "outcomes")
	if err != nil {
		return err
	}
	defer func() {
		if err := db.drop(); err != nil {
			logf("warning: %v", err)
		}
	}()
	operator, err := db.login(ctx, "operator", "expiryctl_operator")
	if err != nil {
		return err
	}
	db.operator = operator
	approver, err := db.login(ctx, "approver", "expiryctl_approver")
	if err != nil {
		return err
	}
	total := 2 * rounds * n
	if err := outcomesBenchPolicy(ctx, db, total, ""); err != nil {
		return err
	}
	logf("archiving %d letters and %d terminal reservations", total, total)
	if err := replayBenchSeed(ctx, db.Pool, exchange, 0, total); err != nil {
		return err
	}
	for _, sql := range []string{
		`CREATE SCHEMA bench_reservations`,
		`CREATE TABLE bench_reservations.outcomes (reservation_id text PRIMARY KEY, terminal_at timestamptz NOT NULL)`,
		fmt.Sprintf(`INSERT INTO bench_reservations.outcomes SELECT format('r-%%s', lpad(g::text, 7, '0')), now() FROM generate_series(0, %d) g`, total-1),
		`GRANT USAGE ON SCHEMA bench_reservations TO expiryctl_operator`,
		`GRANT SELECT ON bench_reservations.outcomes TO expiryctl_operator`,
		`ANALYZE bench_reservations.outcomes`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("stage the outcome table: %w", err)
		}
	}
	if err := db.settle(ctx, logf); err != nil {
		return err
	}

	var off, on []float64
	for round := range rounds {
		for _, watched := range []bool{false, true} {
			query := ""
			if watched {
				query = outcomesBenchQuery
			}
			if err := outcomesBenchPolicy(ctx, db, total, query); err != nil {
				return err
			}
			req, err := replayBenchRequest(ctx, operator, approver, n, 1e9)
			if err != nil {
				return err
			}
			rate, err := outcomesBenchRun(ctx, conn, db, req, n, queue, watched)
			if err != nil {
				return err
			}
			logf("round %d, outcomes watched %v: %.0f msg/s end to end", round+1, watched, rate)
			if watched {
				on = append(on, rate)
			} else {
				off = append(off, rate)
			}
		}
	}
	logf("without: median of %s; with: median of %s", fmtRates(off), fmtRates(on))
	rep.atLeast(fmt.Sprintf("6 replay %s with outcomes watched vs without, medians of %d", count(n), rounds), median(off), median(on), "msg/s", 0.9)
	return nil
}

// outcomesBenchPolicy sets the benchmark's policy, with query as the
// outcome query ("" for none), as the database's owner (applied at once).
func outcomesBenchPolicy(ctx context.Context, db *benchDB, cohort int, query string) error {
	changes, err := replay.ParsePolicyChanges([]string{fmt.Sprintf("max_cohort=%d", cohort), "max_rate=1000000000",
		"stop_queue_depth=100000000", "canary_window=1ms", "outcome_window=1m", "outcome_query=" + query})
	if err != nil {
		return err
	}
	_, err = replay.SetPolicy(ctx, db.Pool, "bench", changes)
	return err
}

// outcomesBenchRun runs req, checks that it completed with every outcome
// known (when watched), empties queue and returns the rate end to end.
func outcomesBenchRun(ctx context.Context, conn *amqp.Connection, db *benchDB, req replay.Request, n int, queue string, watched bool) (float64, error) {
	b, err := broker.NewAMQPBroker(conn)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	runner := &replay.Runner{Pool: db.operator, Broker: b, Actor: "bench", OpenDLQ: replayBenchOpenDLQ(conn)}
	start := time.Now()
	res, err := runner.Run(ctx, req.ID)
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("replay run: %w", err)
	}
	if res.Status != replay.StatusCompleted || res.Confirmed != n {
		return 0, fmt.Errorf("replay run ended %s with %d of %d confirmed", res.Status, res.Confirmed, n)
	}
	if watched && (res.Outcomes == nil || res.Outcomes.Terminal != n) {
		return 0, fmt.Errorf("replay run watched outcomes %+v, want %d terminal", res.Outcomes, n)
	}
	if err := replayBenchExpectDepth(conn, queue, n); err != nil {
		return 0, err
	}
	replayBenchPurge(conn, queue)
	return float64(n) / took.Seconds(), nil
}
