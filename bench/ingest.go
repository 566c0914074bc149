package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// ingestTarget is the rate capture is held to, against the bare drain.
const ingestTarget = 0.8

// ingestCPUTarget is the CPU a captured letter may cost, all processes
// together, against a bare drain plus a bare COPY of the same rows: what
// capture must at least do. It holds on any number of cores, where the
// rate target does not.
const ingestCPUTarget = 1.3

// benchIngest is scenario 1. It fills queues with the same worker dead
// letters: N into B for the subject, and N into each of A1 and A2 for the
// baseline, the same length as B because RabbitMQ's CPU per message
// depends on how long the queue is (draining 100k costs it about twice
// per message what draining 50k does, on some runs), and a baseline on
// shorter queues flattered it. It drains A1 with a bare amqp091 consumer, then B with
// deadletter.Ingest into a fresh archive, then A2 with the bare consumer
// again: the baseline brackets the subject, so a drift in what else the
// machine does (the other engineers' tests) weighs on both alike. Then it
// refills B and drains it with the built binary to measure its peak memory.
func benchIngest(ctx context.Context, cfg *config, rep *report) error {
	const scenario = "ingest"
	n := cfg.IngestN
	queues, err := filledQueues(ctx, cfg, map[string]int{"b": n, "a1": n, "a2": n})
	defer queues.delete(cfg)
	if err != nil {
		return err
	}
	conn, qb := queues.conn, queues.names["b"]

	type phase struct {
		name    string
		letters int
		wall    time.Duration
		cpu     cpuUse
	}
	var phases []phase
	var drainCPU float64                // both drains', every process's, in seconds, for 2n letters
	drainGroups := map[string]float64{} // both drains', per process group
	drain := func(name string, count int) (time.Duration, error) {
		q := queues.names[name]
		cfg.logf("%s: baseline: bare consume-and-ack of %d from %s (prefetch %d, multiple-ack every %d)",
			scenario, count, q, cfg.Prefetch, cfg.AckEvery)
		mon := startCPU()
		d, err := bareDrain(ctx, conn, q, count, cfg.Prefetch, cfg.AckEvery)
		use := mon.Stop()
		if err != nil {
			return 0, fmt.Errorf("baseline drain: %w", err)
		}
		phases = append(phases, phase{"baseline " + name + ".dlq", count, d, use})
		drainCPU += use.known()
		for g, v := range use.Groups {
			drainGroups[g] += v
		}
		cfg.logf("%s: baseline %d msgs in %s = %.0f msg/s", scenario, count, d.Round(time.Millisecond), float64(count)/d.Seconds())
		return d, nil
	}

	base1, err := drain("a1", n)
	if err != nil {
		return err
	}
	db, err := createDB(ctx, cfg.AdminURL, "ingest")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	subjPrefetch := ingestPrefetch(cfg.Prefetch, cfg.Batch)
	cfg.logf("%s: subject: deadletter.Ingest of %s into %s (prefetch %d, batch %s)", scenario, qb, db.Name, subjPrefetch, batchName(cfg.Batch))
	mon := startCPU()
	subjDur, stats, err := ingestInProcess(ctx, conn, db.Pool, qb, subjPrefetch, cfg.Batch)
	subjCPU := mon.Stop()
	if err != nil {
		return fmt.Errorf("deadletter.Ingest: %w", err)
	}
	phases = append(phases, phase{"subject deadletter.Ingest", n, subjDur, subjCPU})
	if err := expectArchived(ctx, db.Pool, n); err != nil {
		return err
	}
	subjRate := float64(n) / subjDur.Seconds()
	cfg.logf("%s: subject %d msgs in %s = %.0f msg/s (%d batches; Ingest's own clock %s)", scenario, stats.Received,
		subjDur.Round(time.Millisecond), subjRate, stats.Batches, stats.Elapsed.Round(time.Millisecond))
	base2, err := drain("a2", n)
	if err != nil {
		return err
	}
	baseRate := float64(2*n) / (base1 + base2).Seconds()
	rep.atLeast(fmt.Sprintf("1 ingest %s: deadletter.Ingest vs bare consume+ack", count(n)), baseRate, subjRate, "msg/s", ingestTarget)
	cfg.logf("%s: limit: PostgreSQL alone, COPY of the subject's %d letters and their states into tables with the same indexes", scenario, n)
	lim, err := databaseLimit(ctx, db, n)
	if err != nil {
		return fmt.Errorf("database limit: %w", err)
	}
	phases = append(phases, phase{"limit PostgreSQL COPY", n, lim.wall, lim.cpu})
	cfg.logf("%s: limit %d rows in %s = %.0f rows/s (%s)", scenario, n, lim.wall.Round(time.Millisecond), lim.rate, lim.how)
	rep.throughputInfo("1 ingest limit: PostgreSQL alone (COPY, same rows and indexes) vs bare", baseRate, lim.rate, "msg/s")
	rep.throughputInfo("1 ingest: deadletter.Ingest vs PostgreSQL alone (COPY)", lim.rate, subjRate, "msg/s")
	rep.note("ingest limit: %s, one transaction, no function or triggers; PostgreSQL CPU %.1f µs per row, the subject's %.1f µs per letter",
		lim.how, 1e6*lim.cpu.Groups["postgres"]/float64(n), 1e6*subjCPU.Groups["postgres"]/float64(n))
	// Capture must at least receive and ack each letter, as the bare drain
	// does, and write its rows, as the bare COPY does; on a machine where
	// the broker, the database and the capture share the cores, their CPU
	// together bounds the rate whatever capture does beyond them.
	bareCPU := drainCPU/float64(2*n) + lim.cpu.known()/float64(n)
	if bareCPU > 0 {
		ceiling := float64(runtime.NumCPU()) / bareCPU
		rep.throughputInfo("1 ingest ceiling: the cores, were capture to cost only drain + COPY, vs bare", baseRate, ceiling, "msg/s")
		rep.note("ingest ceiling: the bare drain and the bare COPY take %.1f µs of CPU a letter together, so %d cores "+
			"allow at most %.0f letters/s (%.2f× the drain) before capture adds anything; the subject took %.1f µs",
			1e6*bareCPU, runtime.NumCPU(), ceiling, ceiling/baseRate, 1e6*subjCPU.known()/float64(n))
		if ceiling/baseRate < ingestTarget {
			rep.note("ingest ceiling: the %.2f× target is above the ceiling: no capture reaches it on this machine, "+
				"where the broker, the database and the capture share %d cores", ingestTarget, runtime.NumCPU())
		}
	} else {
		rep.note("ingest ceiling: no CPU was measured for the bare drain and COPY: the run was too short")
	}
	// CPU per letter, each component against its own floor: the capturing
	// process against the bare consumer, PostgreSQL against the bare COPY
	// of the same rows, RabbitMQ against the bare drain (both drains are
	// 2n letters, so they count half).
	rep.cpuPerItem("1 ingest CPU a letter: the capturing process vs the bare consumer", drainGroups["bench"]/2, subjCPU.Groups["bench"], n, 0)
	rep.cpuPerItem("1 ingest CPU a letter: PostgreSQL vs the bare COPY", lim.cpu.Groups["postgres"], subjCPU.Groups["postgres"], n, 0)
	rep.cpuPerItem("1 ingest CPU a letter: RabbitMQ vs the bare drain", drainGroups["rabbitmq"]/2, subjCPU.Groups["rabbitmq"], n, 0)
	rep.cpuPerItem("1 ingest CPU a letter: all together vs drain + COPY", bareCPU*float64(n), subjCPU.known(), n, ingestCPUTarget)
	for _, p := range phases {
		rep.note("ingest %s: %s in %s; per letter %s", p.name, p.cpu, fmtDuration(p.wall), p.cpu.PerItem(p.letters))
		if share := p.cpu.OtherShare(p.wall); share > 0.15 {
			rep.note("WARNING: during ingest %s, other processes used %.0f%% of the machine's CPU: the ingest ratio is "+
				"unreliable in this run; rerun on a quieter machine", p.name, 100*share)
		}
	}

	if err := stageCeilings(ctx, cfg, rep, qb, baseRate, subjRate); err != nil {
		return fmt.Errorf("stage ceilings: %w", err)
	}
	if cfg.SkipIngestBinary {
		return nil
	}

	// The binary, for its memory: the subject's queue refilled, a fresh
	// archive.
	cfg.logf("%s: refilling %s for the binary run", scenario, qb)
	if err := publishLetters(ctx, conn, qb, n, cfg.Window); err != nil {
		return err
	}
	dbBin, err := createDB(ctx, cfg.AdminURL, "ingestbin")
	if err != nil {
		return err
	}
	defer cfg.dropDB(dbBin)
	args := []string{"dlq", "ingest", "--queue", qb, "--prefetch", strconv.Itoa(cfg.Prefetch)}
	if cfg.Batch > 0 {
		args = append(args, "--batch", strconv.Itoa(cfg.Batch))
	}
	cfg.logf("%s: %s %s", scenario, cfg.Bin, strings.Join(args, " "))
	mon = startCPU()
	run, err := runBinary(ctx, cfg.Bin, args, cfg.binaryEnv(dbBin.URL), false)
	binCPU := mon.Stop()
	if err != nil {
		return err
	}
	if err := expectArchived(ctx, dbBin.Pool, n); err != nil {
		return fmt.Errorf("after the binary's ingest: %w", err)
	}
	binRate := float64(n) / run.Wall.Seconds()
	cfg.logf("%s: binary %d msgs in %s wall = %.0f msg/s, peak RSS %.1f MB", scenario, n,
		run.Wall.Round(time.Millisecond), binRate, float64(run.PeakRSS)/(1<<20))
	rep.throughputInfo("1 ingest: bin/expiryctl dlq ingest (wall, incl. start-up) vs bare", baseRate, binRate, "msg/s")
	rep.rss("1 ingest: bin/expiryctl dlq ingest peak RSS", run.PeakRSS, 100, "")
	rep.note("ingest binary: %s in %s", binCPU, fmtDuration(run.Wall))
	return nil
}

// ingestPrefetch is the prefetch `dlq ingest --prefetch p --batch b` asks
// the broker for (commands/dlq_ingest.go): at least three batches, so that
// the next batch is received and parsed while two are being written. With
// less, the window is full while both writers wait on PostgreSQL and the
// collector idles.
func ingestPrefetch(p, batch int) int {
	if batch <= 0 {
		batch = 500 // deadletter.IngestOptions' default, as `dlq ingest --batch`'s
	}
	return max(p, 3*batch)
}

func batchName(b int) string {
	if b <= 0 {
		return "default"
	}
	return strconv.Itoa(b)
}

// benchQueues are a scenario's queues, filled, and the connection that
// filled them.
type benchQueues struct {
	conn  *amqp.Connection
	names map[string]string // by the name counts gave
}

// filledQueues declares a durable queue of the run's own for each of
// counts (expiryctl-bench-RANDOM.NAME.dlq) and fills it with that many
// worker letters, confirmed and not timed. delete undoes it, also after an
// error.
func filledQueues(ctx context.Context, cfg *config, counts map[string]int) (benchQueues, error) {
	q := benchQueues{names: map[string]string{}}
	conn, err := broker.Dial(cfg.AMQPURL)
	if err != nil {
		return q, err
	}
	q.conn = conn
	prefix := "expiryctl-bench-" + randomSuffix()
	fill := map[string]int{}
	var names []string
	for name, n := range counts {
		q.names[name] = prefix + "." + name + ".dlq"
		fill[q.names[name]] = n
		names = append(names, q.names[name])
	}
	slices.Sort(names)
	if err := declareQueues(conn, cfg.DLQVersion, names...); err != nil {
		return q, err
	}
	cfg.logf("publishing %v letters into %s (classic queues of version %d, confirmed, not timed)", counts, strings.Join(names, ", "), cfg.DLQVersion)
	return q, publishAll(ctx, conn, cfg, fill)
}

// delete deletes the queues and closes the connection.
func (q benchQueues) delete(cfg *config) {
	if q.conn == nil {
		return
	}
	var names []string
	for _, name := range q.names {
		names = append(names, name)
	}
	deleteQueues(cfg.AMQPURL, names...)
	_ = q.conn.Close()
}

// declareQueues declares durable classic queues of the given version (1 or
// 2; 0 leaves it to the broker): with persistent messages, what a DLQ is.
func declareQueues(conn *amqp.Connection, version int, names ...string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	var args amqp.Table
	if version > 0 {
		args = amqp.Table{"x-queue-version": int32(version)}
	}
	for _, q := range names {
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
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

// publishAll fills the queues concurrently, one confirm channel each.
func publishAll(ctx context.Context, conn *amqp.Connection, cfg *config, counts map[string]int) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for q, n := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := publishLetters(ctx, conn, q, n, cfg.Window); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
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
// options (batch 0 is Ingest's default) until the queue is empty. Ingest has to notice the queue is empty
// (its linger timer plus a passive declare), which the bare baseline, told N
// in advance, does not: that tail is part of the product's cost.
func ingestInProcess(ctx context.Context, conn *amqp.Connection, pool *pgxpool.Pool, queue string, prefetch, batch int) (time.Duration, deadletter.IngestStats, error) {
	start := time.Now()
	src, err := broker.OpenDLQSource(conn, queue, prefetch)
	if err != nil {
		return 0, deadletter.IngestStats{}, err
	}
	defer src.Close()
	stats, err := deadletter.Ingest(ctx, pool, src, deadletter.IngestOptions{Actor: "bench", Queue: queue, Batch: batch})
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
