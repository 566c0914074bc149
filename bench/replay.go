package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/replay"
)

// replayBenchWindow is the publish window of the bare baseline, the same
// as the runner's own, so that the two differ only in what the runner adds.
const replayBenchWindow = 1000

// benchReplay is the replay scenario. It replays N archived letters (50k,
// -quick 10k) with replay.Runner at an unlimited rate and compares the
// throughput with
//
//	(a) a bare amqp091 publisher of the same messages, mandatory, streaming
//	    confirms through the runner's window (target ≥ 0.8×, issue 17),
//	    and on two channels with half the window each, the faster of the
//	    two (each the mean of a run before and after the subject) being
//	    what the broker accepts into the queue: the replay's arriving rate
//	    against it, target ≥ 0.9× (issue 36),
//	(b) a publisher that waits for each confirm before the next publish
//	    (target ≥ 3×),
//	(c) RabbitMQ's shovel plugin moving N messages between two queues with
//	    ack-mode on-confirm (target ≥ 1.2×, issue 17),
//	(d) the replay floor (replay_floor.go): the bare publisher with the
//	    least bookkeeping a replay that keeps its items in PostgreSQL
//	    must do, a run before and after the subject; its PostgreSQL and
//	    process CPU an item are the floors of the runner's, and its
//	    arriving rate against the broker limit is what the cores leave
//	    any such replay (report only).
//
// For (a) and (b) the runner is timed end to end, from the Run call to its
// return, against publishers timed from their first publish to their last
// confirm. For (c) both sides are timed the same way, at the destination
// queue, from the first message arriving to the last (destinationClock): the
// shovel's own start-up is a rabbitmqctl call and an Erlang worker, which
// cannot be timed from outside, so the runner's start-up and wind-down are
// left out as well; the end-to-end ratio is printed beside it, report only.
//
// The runner replays five requests of N (-quick: one), taking turns with
// five shovel runs; each side is represented by the median of its rounds,
// since one run of either swings by a tenth on this machine.
//
// Then it replays 2,200 letters at --rate 200 (11 s) and checks the achieved
// rate (within ±5%) and that no one-second window held more than rate +
// burst publishes.
//
// "Unlimited" is not a switch of the runner: the benchmark database's policy
// allows a rate of 10⁹/s and the request asks for it, so the limiter never
// waits. Nothing a user can set turns the ceiling off.
func benchReplay(ctx context.Context, cfg *config) ([]line, error) {
	n, waitEachN, rounds, rateN := 50_000, 3_000, 5, 2_200
	switch {
	case cfg.Smoke:
		n, waitEachN, rounds, rateN = 1_000, 100, 1, 400
	case cfg.Quick:
		n, waitEachN, rounds = 10_000, 1_000, 1
	}
	const ratePerSec = 200.0
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %6.1fs  replay: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	adminURL := firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	amqpURL := firstNonEmpty(os.Getenv("EXPIRYCTL_TEST_AMQP_URL"), os.Getenv("EXPIRYCTL_AMQP_URL"), broker.DefaultURL)
	rep := &report{}

	conn, err := broker.Dial(amqpURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	prefix := "expiryctl-bench-replay-" + randomSuffix()
	exchange := prefix + ".x"
	qSubject, qBare, qWait, qSrc, qDst := prefix+".subject", prefix+".bare", prefix+".wait", prefix+".shovel-src", prefix+".shovel-dst"
	qFloor := prefix + ".floor"
	queues := []string{qSubject, qBare, qWait, qSrc, qDst, qFloor}
	if err := replayBenchTopology(conn, exchange, queues); err != nil {
		return nil, err
	}
	defer func() {
		deleteQueues(amqpURL, append(queues, replayBenchDLQ(exchange))...)
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(exchange, false, false)
			_ = ch.Close()
		}
	}()

	db, err := createDB(ctx, adminURL, "replay")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := db.drop(); err != nil {
			logf("warning: %v", err)
		}
	}()
	// A benchmark database: the policy lets one request hold the whole
	// cohort at a rate the limiter never reaches, and the target queue fill
	// up without halting the run.
	operator, err := db.login(ctx, "operator", "expiryctl_operator")
	if err != nil {
		return nil, err
	}
	db.operator = operator
	approver, err := db.login(ctx, "approver", "expiryctl_approver")
	if err != nil {
		return nil, err
	}
	changes, err := replay.ParsePolicyChanges([]string{fmt.Sprintf("max_cohort=%d", n+rateN),
		"max_rate=1000000000", "stop_queue_depth=100000000", "canary_window=1ms"})
	if err != nil {
		return nil, err
	}
	if _, err := replay.SetPolicy(ctx, db.Pool, "bench", changes); err != nil {
		return nil, err
	}

	logf("archiving %d letters routed to %s, for %d requests of %d", rounds*n, exchange, rounds, n)
	if err := replayBenchSeed(ctx, db.Pool, exchange, 0, rounds*n); err != nil {
		return nil, err
	}
	reqs := make([]replay.Request, rounds)
	for i := range reqs {
		// Each request freezes the n oldest letters still waiting: the next
		// n after the last request's.
		if reqs[i], err = replayBenchRequest(ctx, operator, approver, n, 1e9); err != nil {
			return nil, err
		}
	}
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = replayBenchMessage(i, exchange, reqs[0].ID)
	}
	// The floor runs twice, around the subject, as the broker limit does.
	if err := replayFloorSetup(ctx, db.Pool, n, 2); err != nil {
		return nil, err
	}
	if err := db.settle(ctx, logf); err != nil {
		return nil, err
	}

	// (a) before, subject, (a) after: the baseline is the mean of the two
	// around the subject, so that drift in the broker's disk speed during
	// the scenario lands on both.
	logf("baseline (a): bare publisher, %d messages, window %d", n, replayBenchWindow)
	cpu := startCPU()
	bare1, err := replayBenchBare(ctx, conn, exchange, "bare", qBare, msgs, replayBenchWindow, 1)
	bareCPU := cpu.Stop()
	logf("baseline (a) CPU: %s", bareCPU)
	if err != nil {
		return nil, fmt.Errorf("bare publisher: %w", err)
	}
	logf("baseline (a): %s = %.0f msg/s", bare1.Round(time.Millisecond), float64(n)/bare1.Seconds())
	// Whether one channel or the broker is the limit: the same messages
	// over two channels at once, the window split between them. Measured
	// around the subject too, as (a) is: the broker limit judges the
	// replay's arriving rate, and one run of it swung by a fifth.
	logf("baseline (a) on 2 channels, window %d each", replayBenchWindow/2)
	twoBefore, err := replayBenchBare(ctx, conn, exchange, "bare", qBare, msgs, replayBenchWindow/2, 2)
	if err != nil {
		return nil, fmt.Errorf("bare publisher on 2 channels: %w", err)
	}
	logf("baseline (a) on 2 channels: %s = %.0f msg/s", twoBefore.Round(time.Millisecond), float64(n)/twoBefore.Seconds())
	floorBefore, floorCPU, err := replayFloorRun(ctx, conn, db.Pool, 1, n, exchange, "floor", qFloor, msgs)
	if err != nil {
		return nil, err
	}
	logf("replay floor: %.0f msg/s arriving; CPU %s", floorBefore, floorCPU)

	// The subject and the shovel take turns, so that drift in the machine's
	// speed spreads over both.
	var subjRates, subjArrivals, shovelRates []float64
	var shovelErr error
	subjCPU := cpuUse{Groups: map[string]float64{}} // every round's, for rounds×n items
	for round, req := range reqs {
		rate, arrival, use, err := replayBenchSubject(ctx, conn, db, req, n, qSubject, logf)
		if err != nil {
			return nil, err
		}
		for g, v := range use.Groups {
			subjCPU.Groups[g] += v
		}
		subjCPU.Machine += use.Machine
		subjRates = append(subjRates, rate)
		subjArrivals = append(subjArrivals, arrival)
		if shovelErr != nil {
			continue
		}
		// A shovel that finishes before the clock's first look (a busy
		// machine delays the look, not the shovel) is measured again.
		for try := 1; try <= shovelTries; try++ {
			logf("baseline (c): filling %s with %d messages for the shovel", qSrc, n)
			if err := replayBenchFill(ctx, conn, qSrc, msgs); err != nil {
				return nil, err
			}
			rate, shovelErr = replayBenchShovel(ctx, conn, amqpURL, fmt.Sprintf("%s-shovel-%d-%d", prefix, round, try), qSrc, qDst, n)
			replayBenchPurge(conn, qSrc)
			replayBenchPurge(conn, qDst)
			if !errors.Is(shovelErr, errTooFastToTime) {
				break
			}
			logf("baseline (c): try %d: %v", try, shovelErr)
		}
		if shovelErr == nil {
			logf("baseline (c): shovel %.0f msg/s", rate)
			shovelRates = append(shovelRates, rate)
		}
	}
	subjRate, subjArrival := median(subjRates), median(subjArrivals)
	logf("subject: median of %s = %.0f msg/s end to end; arriving: median of %s = %.0f msg/s",
		fmtRates(subjRates), subjRate, fmtRates(subjArrivals), subjArrival)

	bare2, err := replayBenchBare(ctx, conn, exchange, "bare", qBare, msgs, replayBenchWindow, 1)
	if err != nil {
		return nil, fmt.Errorf("bare publisher: %w", err)
	}
	bareRate := float64(n) / ((bare1 + bare2) / 2).Seconds()
	logf("baseline (a) again: %s; mean %.0f msg/s", bare2.Round(time.Millisecond), bareRate)
	rep.atLeast(fmt.Sprintf("5 replay %s: replay.Runner vs bare confirm-window publisher", count(n)), bareRate, subjRate, "msg/s", 0.8)
	// CPU per item, each component against the bare publisher's: the
	// runner's process against the publisher's, RabbitMQ against what the
	// same publishes cost it; PostgreSQL is the replay's own (the bare
	// publisher records nothing), so it has no floor.
	if items := len(reqs) * n; items > 0 {
		scale := float64(items) / float64(n) // the floor, counted for as many items as the subject
		rep.cpuPerItem("5 replay CPU an item: the runner's process vs the bare publisher", scale*bareCPU.Groups["bench"], subjCPU.Groups["bench"], items, 0)
		rep.cpuPerItem("5 replay CPU an item: RabbitMQ vs the bare publisher's", scale*bareCPU.Groups["rabbitmq"], subjCPU.Groups["rabbitmq"], items, 0)
		rep.cpuPerItem("5 replay CPU an item: all together vs the bare publisher", scale*bareCPU.known(), subjCPU.known(), items, 0)
	}
	twoAfter, err := replayBenchBare(ctx, conn, exchange, "bare", qBare, msgs, replayBenchWindow/2, 2)
	if err != nil {
		return nil, fmt.Errorf("bare publisher on 2 channels: %w", err)
	}
	twoRate := float64(n) / ((twoBefore + twoAfter) / 2).Seconds()
	logf("baseline (a) on 2 channels again: %s; mean %.0f msg/s", twoAfter.Round(time.Millisecond), twoRate)
	floorAfter, floorCPU2, err := replayFloorRun(ctx, conn, db.Pool, 2, n, exchange, "floor", qFloor, msgs)
	if err != nil {
		return nil, err
	}
	logf("replay floor again: %.0f msg/s arriving; CPU %s", floorAfter, floorCPU2)
	floorRate := (floorBefore + floorAfter) / 2
	for g, v := range floorCPU2.Groups {
		floorCPU.Groups[g] += v
	}
	if items := len(reqs) * n; items > 0 {
		scale := float64(items) / float64(2*n) // the floor's two runs, counted for as many items as the subject
		rep.cpuPerItem("5 replay CPU an item: the runner's process vs the replay floor's", scale*floorCPU.Groups["bench"], subjCPU.Groups["bench"], items, 0)
		rep.cpuPerItem("5 replay CPU an item: PostgreSQL vs the replay floor's (read, mark, record; nothing governed)",
			scale*floorCPU.Groups["postgres"], subjCPU.Groups["postgres"], items, 0)
		rep.cpuPerItem("5 replay CPU an item: all together vs the replay floor", scale*floorCPU.known(), subjCPU.known(), items, 0)
	}

	logf("baseline (b): wait for each confirm, %d messages", waitEachN)
	waitDur, err := replayBenchBare(ctx, conn, exchange, "wait", qWait, msgs[:waitEachN], 1, 1)
	if err != nil {
		return nil, fmt.Errorf("wait-each publisher: %w", err)
	}
	waitRate := float64(waitEachN) / waitDur.Seconds()
	logf("baseline (b): %s = %.0f msg/s", waitDur.Round(time.Millisecond), waitRate)
	rep.atLeast(fmt.Sprintf("5 replay %s: replay.Runner vs publish-and-wait-each", count(n)), waitRate, subjRate, "msg/s", 3)

	if shovelErr != nil {
		rep.failed("5 replay: shovel baseline", shovelErr)
	} else {
		shovelRate := median(shovelRates)
		logf("baseline (c): shovel median of %s = %.0f msg/s", fmtRates(shovelRates), shovelRate)
		rep.atLeast(fmt.Sprintf("5 replay %s: replay.Runner vs shovel (on-confirm), both timed at the destination, medians of %d", count(n), rounds),
			shovelRate, subjArrival, "msg/s", 1.2)
		rep.throughputInfo(fmt.Sprintf("5 replay %s: replay.Runner end to end (start-up and wind-down included) vs shovel", count(n)),
			shovelRate, subjRate, "msg/s")
		// What the broker accepts into one durable queue, with confirms,
		// bounds any replay to it however little the replay adds.
		brokerLimit := max(bareRate, twoRate)
		// Issue 36: a replay's bookkeeping (three writes an item, in
		// PostgreSQL on the same cores) may take at most a tenth off the
		// rate the broker accepts.
		rep.atLeast(fmt.Sprintf("5 replay %s: replay.Runner arriving vs the broker limit, medians of %d", count(n), rounds),
			brokerLimit, subjArrival, "msg/s", 0.9)
		rep.throughputInfo("5 replay broker limit: the bare publisher (the faster of 1 and 2 channels) vs shovel",
			shovelRate, brokerLimit, "msg/s")
		// What the cores leave a replay that keeps its items in PostgreSQL
		// at all: the 0.9× above holds only where this does.
		rep.throughputInfo("5 replay floor (the least bookkeeping, means of 2) arriving vs the broker limit", brokerLimit, floorRate, "msg/s")
		rep.throughputInfo(fmt.Sprintf("5 replay %s: replay.Runner arriving vs the replay floor", count(n)), floorRate, subjArrival, "msg/s")
		rep.note("replay broker limit: the bare publisher confirmed %.0f msg/s on one channel and %.0f on two (window %d each) "+
			"into one durable queue; no replay of these messages publishes faster, so replay vs shovel is at most %.2f× in this run",
			bareRate, twoRate, replayBenchWindow/2, brokerLimit/shovelRate)
		// A replay publishes each item with a confirm, as the bare
		// publisher does, and records it besides: the publisher's CPU
		// alone bounds what the cores allow it.
		if bareCPU.known() > 0 {
			ceiling := float64(runtime.NumCPU()) / (bareCPU.known() / float64(n))
			rep.throughputInfo("5 replay ceiling: the cores, were replay to cost only the bare publisher, vs shovel",
				shovelRate, ceiling, "msg/s")
			rep.note("replay ceiling: the bare confirm-window publisher takes %.1f µs of CPU a message (%s), so %d cores allow "+
				"at most %.0f messages/s (%.2f× the shovel) before a replay records anything", 1e6*bareCPU.known()/float64(n),
				bareCPU.PerItem(n), runtime.NumCPU(), ceiling, ceiling/shovelRate)
		}
	}
	for _, q := range queues {
		replayBenchPurge(conn, q)
	}

	// The ceiling held: 2,200 letters at 200/s.
	logf("rate: archiving %d more letters, replaying them at --rate %g", rateN, ratePerSec)
	if err := replayBenchSeed(ctx, db.Pool, exchange, 1_000_000, rateN); err != nil {
		return nil, err
	}
	rateReq, err := replayBenchRequest(ctx, operator, approver, rateN, ratePerSec)
	if err != nil {
		return nil, err
	}
	b, err := broker.NewAMQPBroker(conn)
	if err != nil {
		return nil, err
	}
	timed := &replayBenchTimed{Broker: b}
	runner := &replay.Runner{Pool: operator, Broker: timed, Actor: "bench", OpenDLQ: replayBenchOpenDLQ(conn)}
	res, err := runner.Run(ctx, rateReq.ID)
	_ = b.Close()
	if err != nil {
		return nil, fmt.Errorf("replay run at --rate %g: %w", ratePerSec, err)
	}
	if res.Confirmed != rateN || len(timed.times) != rateN {
		return nil, fmt.Errorf("replay run at --rate %g: %d confirmed, %d published, want %d", ratePerSec, res.Confirmed, len(timed.times), rateN)
	}
	span := timed.times[rateN-1].Sub(timed.times[0])
	achieved := float64(rateN-1) / span.Seconds()
	burst := int(math.Max(1, math.Ceil(ratePerSec/20)))
	maxWindow := 0
	for i := range timed.times {
		in := 0
		for j := i; j < len(timed.times) && timed.times[j].Sub(timed.times[i]) < time.Second; j++ {
			in++
		}
		maxWindow = max(maxWindow, in)
	}
	logf("rate: %d publishes over %s = %.1f/s; busiest second %d (ceiling %g + burst %d)", rateN, span.Round(time.Millisecond), achieved, maxWindow, ratePerSec, burst)
	ratio := achieved / ratePerSec
	v := pass
	if !(ratio >= 0.95 && ratio <= 1.05) || span < 10*time.Second {
		v = fail
	}
	rep.lines = append(rep.lines, line{fmt.Sprintf("5 replay --rate %g over %s: achieved rate", ratePerSec, span.Round(100*time.Millisecond)),
		fmt.Sprintf("%g msg/s", ratePerSec), fmt.Sprintf("%.1f msg/s", achieved), fmt.Sprintf("%.3f×", ratio), "0.95–1.05×", v})
	ceiling := int(ratePerSec) + burst
	v = pass
	if maxWindow > ceiling {
		v = fail
	}
	rep.lines = append(rep.lines, line{fmt.Sprintf("5 replay --rate %g: publishes in the busiest 1 s window", ratePerSec),
		fmt.Sprintf("%d (rate + burst)", ceiling), fmt.Sprint(maxWindow), fmt.Sprintf("%.3f×", float64(maxWindow)/float64(ceiling)),
		fmt.Sprintf("≤ %d", ceiling), v})
	for _, note := range rep.notes {
		logf("%s", note)
	}
	return rep.lines, nil
}

// replayBenchSubject runs req with replay.Runner at an unlimited rate,
// checks that all n items reached queue, empties it, and returns the rate
// end to end (from the Run call to its return) and on the destination clock
// (messages arriving in queue, as the shovel is timed).
func replayBenchSubject(ctx context.Context, conn *amqp.Connection, db *benchDB, req replay.Request, n int, queue string,
	logf func(string, ...any)) (endToEnd, atDestination float64, use cpuUse, err error) {
	logf("subject: replay.Runner over request %d (%d items, rate ceiling 1e9/s)", req.ID, n)
	b, err := broker.NewAMQPBroker(conn)
	if err != nil {
		return 0, 0, use, err
	}
	clock, err := startDestinationClock(conn, queue, n)
	if err != nil {
		return 0, 0, use, err
	}
	defer clock.stop()
	runner := &replay.Runner{Pool: db.operator, Broker: b, Actor: "bench", OpenDLQ: replayBenchOpenDLQ(conn)}
	cpu := startCPU()
	start := time.Now()
	res, err := runner.Run(ctx, req.ID)
	took := time.Since(start)
	use = cpu.Stop()
	logf("subject CPU: %s", use)
	_ = b.Close()
	if err != nil {
		return 0, 0, use, fmt.Errorf("replay run: %w", err)
	}
	if res.Status != replay.StatusCompleted || res.Confirmed != n {
		return 0, 0, use, fmt.Errorf("replay run ended %s with %d of %d confirmed", res.Status, res.Confirmed, n)
	}
	if atDestination, err = clock.rate(ctx, time.Minute); err != nil {
		return 0, 0, use, err
	}
	if err := replayBenchExpectDepth(conn, queue, n); err != nil {
		return 0, 0, use, err
	}
	replayBenchPurge(conn, queue)
	endToEnd = float64(n) / took.Seconds()
	logf("subject: %s = %.0f msg/s end to end; %.0f msg/s arriving in %s", took.Round(time.Millisecond), endToEnd, atDestination, queue)
	return endToEnd, atDestination, use, nil
}

// fmtRates lists rates as "a, b, c msg/s".
func fmtRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(parts, ", ") + " msg/s"
}

// replayBenchDLQ is the dead-letter queue the letters of a benchmark whose
// exchange is exchange were captured from: each run captures it, as
// `replay run` does, so its CPU is the subject's.
func replayBenchDLQ(exchange string) string { return exchange + ".dlq" }

// replayBenchOpenDLQ opens a run's capture of a queue on conn.
func replayBenchOpenDLQ(conn *amqp.Connection) replay.OpenDLQ {
	return func(_ context.Context, queue string) (deadletter.ClosableSource, error) {
		return broker.OpenDLQSource(conn, queue, 1000)
	}
}

// replayBenchTopology declares the exchange, its dead-letter queue and a
// queue per baseline, each bound by its own routing key.
func replayBenchTopology(conn *amqp.Connection, exchange string, queues []string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", exchange, err)
	}
	if _, err := ch.QueueDeclare(replayBenchDLQ(exchange), true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare %s: %w", replayBenchDLQ(exchange), err)
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare %s: %w", q, err)
		}
		key := q[strings.LastIndex(q, ".")+1:]
		if err := ch.QueueBind(q, key, exchange, false, nil); err != nil {
			return fmt.Errorf("bind %s: %w", q, err)
		}
	}
	return nil
}

// replayBenchSeed archives n worker dead letters (workerLetter(first+i))
// whose original exchange is the benchmark's and whose routing key reaches
// its "subject" queue, as `dlq ingest` stores them.
func replayBenchSeed(ctx context.Context, pool *pgxpool.Pool, exchange string, first, n int) error {
	const batch = 5000
	now := time.Now()
	for lo := 0; lo < n; lo += batch {
		letters := make([]deadletter.Letter, 0, batch)
		for i := lo; i < min(lo+batch, n); i++ {
			m := workerLetter(first + i)
			m.Headers["x-original-exchange"] = exchange
			m.Headers["x-original-routing-key"] = "subject"
			letters = append(letters, deadletter.Parse(deadletter.Message{Queue: replayBenchDLQ(exchange), Body: m.Body, Headers: m.Headers,
				ContentType: m.ContentType, MessageID: m.MessageId, Timestamp: m.Timestamp}, nil, now))
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := deadletter.Insert(ctx, tx, letters)
			return err
		})
		if err != nil {
			return fmt.Errorf("archive letters: %w", err)
		}
	}
	return nil
}

// replayBenchRequest freezes the n oldest waiting letters into a request at
// rate, with no canary, as the operator's login, and approves it as the
// approver's.
func replayBenchRequest(ctx context.Context, operator, approverLogin *pgxpool.Pool, n int, rate float64) (replay.Request, error) {
	svc := &replay.Service{Pool: operator, Actor: "bench-requester"}
	approver := &replay.Service{Pool: approverLogin, Actor: "bench-approver"}
	zero := 0
	created, err := svc.Create(ctx, replay.NewRequest{Kind: replay.KindReplay, Selection: replay.Selection{Max: n},
		Rate: rate, Canary: &zero, Why: "benchmark",
		// The runner's publishing is measured: nothing consumes the target
		// queue, so the handler check would refuse (no-consumer), and the
		// seeded archive holds every category, permanent ones too.
		SameHandlerWhy: "benchmark: the target queue is measured, not consumed", IncludePermanent: true,
		// Through the exchange, as the baselines publish: the letters' x-death
		// names a retry queue of a work queue the benchmark does not declare.
		ViaExchange: true})
	if err != nil {
		return replay.Request{}, fmt.Errorf("create the replay request: %w", err)
	}
	if created.Request.Items != n {
		return replay.Request{}, fmt.Errorf("the request froze %d letters, want %d", created.Request.Items, n)
	}
	req, err := approver.Approve(ctx, created.Request.ID, replay.ReviewOptions{Why: "benchmark", CohortHash: created.Request.CohortHash})
	if err != nil {
		return replay.Request{}, fmt.Errorf("approve the replay request: %w", err)
	}
	return req, nil
}

// replayBenchMessage is what the runner publishes for letter n: the job,
// its producer headers minus the failure bookkeeping, and the replay
// headers.
func replayBenchMessage(n int, exchange string, request int64) amqp.Publishing {
	m := workerLetter(n)
	h := amqp.Table{}
	for k, v := range m.Headers {
		switch k {
		case "x-death", "x-error-class", "x-last-error", "x-attempt-history":
			continue
		}
		h[k] = v
	}
	h["x-original-exchange"] = exchange
	h["x-original-routing-key"] = "subject"
	h[replay.HeaderReplayRequest] = request
	h[replay.HeaderReplayCount] = int64(1)
	h[replay.HeaderReplayedBy] = "bench"
	h[replay.HeaderApprovedBy] = "bench-approver"
	h[replay.HeaderReplayItem] = int64(n + 1)
	return amqp.Publishing{Headers: h, ContentType: m.ContentType, MessageId: m.MessageId, DeliveryMode: amqp.Persistent, Body: m.Body}
}

// replayBenchBare publishes msgs to exchange with routing key (which routes
// to queue), mandatory, keeping up to window unconfirmed (window 1: waiting
// for each confirm), and returns the time until the broker confirmed them
// all. With channels > 1 the messages are split over that many channels of
// conn, each with its own window, published at once. The queue is checked
// and purged afterwards.
func replayBenchBare(ctx context.Context, conn *amqp.Connection, exchange, key, queue string, msgs []amqp.Publishing, window, channels int) (time.Duration, error) {
	chans := make([]*amqp.Channel, 0, channels)
	defer func() {
		for _, ch := range chans {
			_ = ch.Close()
		}
	}()
	for range channels {
		ch, err := conn.Channel()
		if err != nil {
			return 0, err
		}
		chans = append(chans, ch)
		if err := ch.Confirm(false); err != nil {
			return 0, err
		}
	}
	returns := make([]chan amqp.Return, channels)
	for i, ch := range chans {
		returns[i] = ch.NotifyReturn(make(chan amqp.Return, len(msgs)))
	}
	errs := make([]error, channels)
	var wg sync.WaitGroup
	start := time.Now()
	for i, ch := range chans {
		part := msgs[i*len(msgs)/channels : (i+1)*len(msgs)/channels]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = replayBenchPublishWindowed(ctx, ch, exchange, key, part, window)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	for _, rc := range returns {
		select {
		case r := <-rc:
			return 0, fmt.Errorf("a publish to %s/%s was returned: %s", exchange, key, r.ReplyText)
		default:
		}
	}
	if err := replayBenchExpectDepth(conn, queue, len(msgs)); err != nil {
		return 0, err
	}
	replayBenchPurge(conn, queue)
	return elapsed, nil
}

// replayBenchPublishWindowed publishes msgs on ch, keeping up to window
// unconfirmed, and waits for the last confirm.
func replayBenchPublishWindowed(ctx context.Context, ch *amqp.Channel, exchange, key string, msgs []amqp.Publishing, window int) error {
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	settle := func(dc *amqp.DeferredConfirmation) error {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("the broker nacked a publish")
		}
		return nil
	}
	for _, m := range msgs {
		for len(pending) >= window {
			if err := settle(pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, m)
		if err != nil {
			return err
		}
		pending = append(pending, dc)
	}
	for _, dc := range pending {
		if err := settle(dc); err != nil {
			return err
		}
	}
	return nil
}

// replayBenchFill puts msgs into queue through the default exchange with a
// confirm window (not timed).
func replayBenchFill(ctx context.Context, conn *amqp.Connection, queue string, msgs []amqp.Publishing) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	var pending []*amqp.DeferredConfirmation
	for i, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, m)
		if err != nil {
			return err
		}
		pending = append(pending, dc)
		if len(pending) == 2000 || i == len(msgs)-1 {
			for _, dc := range pending {
				ok, err := dc.WaitContext(ctx)
				if err != nil {
					return fmt.Errorf("fill %s: publish not confirmed: %w", queue, err)
				}
				if !ok {
					return fmt.Errorf("fill %s: publish not confirmed (nacked)", queue)
				}
			}
			pending = pending[:0]
		}
	}
	return replayBenchExpectDepth(conn, queue, len(msgs))
}

// replayBenchShovel starts a dynamic shovel from src to dst (ack-mode
// on-confirm, deleting itself after moving the queue's length) with
// rabbitmqctl, and returns its rate on the destination clock: from the
// first message it moved to the last. The rabbitmqctl call, whose Erlang
// start-up would otherwise be charged to the shovel, is outside the clock.
func replayBenchShovel(ctx context.Context, conn *amqp.Connection, amqpURL, name, src, dst string, n int) (float64, error) {
	uri := strings.TrimSuffix(amqpURL, "/")
	def, _ := json.Marshal(map[string]any{"src-uri": uri, "src-queue": src, "dest-uri": uri, "dest-queue": dst,
		"ack-mode": "on-confirm", "src-delete-after": "queue-length"})
	clock, err := startDestinationClock(conn, dst, n)
	if err != nil {
		return 0, err
	}
	defer clock.stop()
	defer func() { _ = exec.Command("rabbitmqctl", "clear_parameter", "shovel", name).Run() }()
	if out, err := exec.CommandContext(ctx, "rabbitmqctl", "set_parameter", "shovel", name, string(def)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("rabbitmqctl set_parameter shovel: %w: %s (is the rabbitmq_shovel plugin enabled?)", err, strings.TrimSpace(string(out)))
	}
	return clock.rate(ctx, 10*time.Minute)
}

// destinationClock times messages arriving in a queue by polling its depth
// every 5 ms: from the first look that finds messages to the first look that
// finds n. The runner and the shovel are both timed this way for the shovel
// line, so that neither is charged its start-up or its wind-down (confirms,
// acks, bookkeeping) and the other not.
type destinationClock struct {
	queue string
	n     int
	mu    sync.Mutex
	first *depthSample
	last  depthSample
	err   error
	done  chan struct{}
	quit  chan struct{}
	ch    *amqp.Channel
}

type depthSample struct {
	at    time.Time
	depth int
}

// errTooFastToTime is a destination that filled before its clock first
// looked at it.
var errTooFastToTime = errors.New("too fast to time")

// shovelTries is how often the shovel is measured when it is too fast to
// time.
const shovelTries = 3

func startDestinationClock(conn *amqp.Connection, queue string, n int) (*destinationClock, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	c := &destinationClock{queue: queue, n: n, done: make(chan struct{}), quit: make(chan struct{}), ch: ch}
	go c.poll()
	return c, nil
}

func (c *destinationClock) poll() {
	defer close(c.done)
	for {
		q, err := c.ch.QueueDeclarePassive(c.queue, true, false, false, false, nil)
		now := time.Now()
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.mu.Unlock()
			return
		}
		if q.Messages > 0 && c.first == nil {
			c.first = &depthSample{now, q.Messages}
		}
		c.last = depthSample{now, q.Messages}
		full := q.Messages >= c.n
		c.mu.Unlock()
		if full {
			return
		}
		select {
		case <-c.quit:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// rate waits until the queue holds n messages and returns the arrival rate
// between the first look that found messages and that moment.
func (c *destinationClock) rate(ctx context.Context, timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		first, last, err := c.first, c.last, c.err
		c.mu.Unlock()
		switch {
		case err != nil:
			return 0, fmt.Errorf("inspect %s: %w", c.queue, err)
		case last.depth >= c.n && first != nil:
			moved := c.n - first.depth
			span := last.at.Sub(first.at)
			if moved <= 0 || span <= 0 {
				return 0, fmt.Errorf("%d messages reached %s before the first look: %w", c.n, c.queue, errTooFastToTime)
			}
			return float64(moved) / span.Seconds(), nil
		case time.Now().After(deadline):
			return 0, fmt.Errorf("%d of %d messages reached %s in %s", last.depth, c.n, c.queue, timeout)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *destinationClock) stop() {
	close(c.quit)
	<-c.done
	_ = c.ch.Close()
}

func replayBenchExpectDepth(conn *amqp.Connection, queue string, n int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return err
	}
	if q.Messages != n {
		return fmt.Errorf("queue %s holds %d messages, want %d", queue, q.Messages, n)
	}
	return nil
}

func replayBenchPurge(conn *amqp.Connection, queue string) {
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueuePurge(queue, false)
		_ = ch.Close()
	}
}

// replayBenchTimed records when each publish happened.
type replayBenchTimed struct {
	replay.Broker
	times []time.Time
}

// Encode is its broker's: the copies are what a real run sends.
func (b *replayBenchTimed) Encode(c replay.Copy) (replay.Message, error) {
	return b.Broker.(replay.Encoder).Encode(c)
}

func (b *replayBenchTimed) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	b.times = append(b.times, time.Now())
	return b.Broker.Publish(ctx, m)
}
