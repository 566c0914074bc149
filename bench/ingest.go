package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/broker"
	"github.com/expiryctl/expiryctl/deadletter"
)

// benchIngest is scenario 1. It fills two queues with the same N worker dead
// letters, drains A with a bare amqp091 consumer (the baseline: what the
// broker and client library allow on this machine) and B with
// deadletter.Ingest into a fresh archive (the subject), then refills B and
// drains it with the built binary to measure its peak memory.
func benchIngest(ctx context.Context, cfg *config, rep *report) error {
	const scenario = "ingest"
	conn, err := broker.Dial(cfg.AMQPURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	prefix := "expiryctl-bench-" + randomSuffix()
	qa, qb := prefix+".a.dlq", prefix+".b.dlq"
	if err := declareQueues(conn, qa, qb); err != nil {
		return err
	}
	defer deleteQueues(cfg.AMQPURL, qa, qb)

	cfg.logf("%s: publishing %d letters into %s and %s (confirmed, not timed)", scenario, cfg.IngestN, qa, qb)
	if err := publishBoth(ctx, conn, cfg, qa, qb); err != nil {
		return err
	}

	cfg.logf("%s: baseline: bare consume-and-ack of %s (prefetch %d, multiple-ack every %d)", scenario, qa, cfg.Prefetch, cfg.AckEvery)
	cpu0 := takeCPU()
	baseDur, err := bareDrain(ctx, conn, qa, cfg.IngestN, cfg.Prefetch, cfg.AckEvery)
	if err != nil {
		return fmt.Errorf("baseline drain: %w", err)
	}
	rep.note("ingest baseline (bare consumer): %s in %s", takeCPU().since(cpu0), fmtDuration(baseDur))
	baseRate := float64(cfg.IngestN) / baseDur.Seconds()
	cfg.logf("%s: baseline %d msgs in %s = %.0f msg/s", scenario, cfg.IngestN, baseDur.Round(time.Millisecond), baseRate)

	db, err := createDB(ctx, cfg.AdminURL, "ingest")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	cfg.logf("%s: subject: deadletter.Ingest of %s into %s (prefetch %d, default batch)", scenario, qb, db.Name, cfg.Prefetch)
	cpu0 = takeCPU()
	subjDur, stats, err := ingestInProcess(ctx, conn, db.Pool, qb, cfg.Prefetch)
	if err != nil {
		return fmt.Errorf("deadletter.Ingest: %w", err)
	}
	rep.note("ingest subject (deadletter.Ingest): %s in %s", takeCPU().since(cpu0), fmtDuration(subjDur))
	if err := expectArchived(ctx, db.Pool, cfg.IngestN); err != nil {
		return err
	}
	subjRate := float64(cfg.IngestN) / subjDur.Seconds()
	cfg.logf("%s: subject %d msgs in %s = %.0f msg/s (%d batches; Ingest's own clock %s)", scenario, stats.Received,
		subjDur.Round(time.Millisecond), subjRate, stats.Batches, stats.Elapsed.Round(time.Millisecond))
	rep.atLeast(fmt.Sprintf("1 ingest %s: deadletter.Ingest vs bare consume+ack", count(cfg.IngestN)), baseRate, subjRate, "msg/s", 0.6)

	// The binary, for its memory: same queue refilled, a fresh archive.
	cfg.logf("%s: refilling %s for the binary run", scenario, qb)
	if err := publishLetters(ctx, conn, qb, cfg.IngestN, cfg.Window); err != nil {
		return err
	}
	dbBin, err := createDB(ctx, cfg.AdminURL, "ingestbin")
	if err != nil {
		return err
	}
	defer cfg.dropDB(dbBin)
	cfg.logf("%s: %s dlq ingest --queue %s --prefetch %d", scenario, cfg.Bin, qb, cfg.Prefetch)
	cpu0 = takeCPU()
	run, err := runBinary(ctx, cfg.Bin, []string{"dlq", "ingest", "--queue", qb, "--prefetch", strconv.Itoa(cfg.Prefetch)},
		cfg.binaryEnv(dbBin.URL), false)
	if err != nil {
		return err
	}
	rep.note("ingest binary (dlq ingest): %s (expiryctl %.1fs) in %s", takeCPU().since(cpu0), run.CPU.Seconds(), fmtDuration(run.Wall))
	if err := expectArchived(ctx, dbBin.Pool, cfg.IngestN); err != nil {
		return fmt.Errorf("after the binary's ingest: %w", err)
	}
	binRate := float64(cfg.IngestN) / run.Wall.Seconds()
	cfg.logf("%s: binary %d msgs in %s wall = %.0f msg/s, peak RSS %.1f MB", scenario, cfg.IngestN,
		run.Wall.Round(time.Millisecond), binRate, float64(run.PeakRSS)/(1<<20))
	rep.throughputInfo("1 ingest: bin/expiryctl dlq ingest (wall, incl. start-up) vs bare", baseRate, binRate, "msg/s")
	rep.rss("1 ingest: bin/expiryctl dlq ingest peak RSS", run.PeakRSS, 100, "")
	return nil
}

func declareQueues(conn *amqp.Connection, names ...string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for _, q := range names {
		// Durable classic queues with persistent messages: what a DLQ is.
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare %s: %w", q, err)
		}
	}
	return nil
}

// deleteQueues removes the scenario's queues on a connection of its own, so
// that it works whatever state the scenario's connection is in.
func deleteQueues(amqpURL string, names ...string) {
	conn, err := broker.Dial(amqpURL)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	for _, q := range names {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
}

// publishBoth fills the two queues concurrently, one confirm channel each.
func publishBoth(ctx context.Context, conn *amqp.Connection, cfg *config, qa, qb string) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, q := range []string{qa, qb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = publishLetters(ctx, conn, q, cfg.IngestN, cfg.Window)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bareDrain is the baseline consumer: no parsing, no storage, nothing but
// receiving and acknowledging, the way the fastest honest amqp091 consumer
// does it (prefetch window, one multiple-ack per ackEvery deliveries). The
// clock stops when a synchronous call on the same channel, which the broker
// answers after it processed every earlier ack, reports the queue empty.
func bareDrain(ctx context.Context, conn *amqp.Connection, queue string, n, prefetch, ackEvery int) (time.Duration, error) {
	start := time.Now()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return 0, err
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	got := 0
	for got < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return 0, fmt.Errorf("consumer closed after %d of %d deliveries", got, n)
			}
			got++
			if got%ackEvery == 0 || got == n {
				if err := ch.Ack(d.DeliveryTag, true); err != nil {
					return 0, err
				}
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("no delivery for 30s after %d of %d", got, n)
		}
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if q.Messages != 0 {
		return 0, fmt.Errorf("queue %s still holds %d messages after the baseline drain", queue, q.Messages)
	}
	return elapsed, nil
}

// ingestInProcess times what `dlq ingest` does after connecting: open the
// source with the given prefetch, then deadletter.Ingest with default
// options until the queue is empty. Ingest has to notice the queue is empty
// (its linger timer plus a passive declare), which the bare baseline, told N
// in advance, does not: that tail is part of the product's cost.
func ingestInProcess(ctx context.Context, conn *amqp.Connection, pool *pgxpool.Pool, queue string, prefetch int) (time.Duration, deadletter.IngestStats, error) {
	start := time.Now()
	src, err := broker.OpenDLQSource(conn, queue, prefetch)
	if err != nil {
		return 0, deadletter.IngestStats{}, err
	}
	defer src.Close()
	stats, err := deadletter.Ingest(ctx, pool, src, deadletter.IngestOptions{Actor: "bench", Queue: queue})
	return time.Since(start), stats, err
}

// expectArchived checks that the archive holds exactly n letters, so that a
// fast run that stored nothing cannot pass.
func expectArchived(ctx context.Context, pool *pgxpool.Pool, n int) error {
	var got int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM expiryctl.dead_letters").Scan(&got); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("the archive holds %d letters, want %d", got, n)
	}
	return nil
}
