package replay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// cuttable hands a runner brokers on connections of their own, which the
// test cuts in the middle of the run, as a node stopping cuts them.
type cuttable struct {
	t  *testing.T
	mu sync.Mutex
	// conns are every connection dialled, the last the current one.
	conns []*amqp.Connection
	// refuse, when set, makes every reconnect fail.
	refuse bool
}

func (c *cuttable) open(context.Context) (Broker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse {
		return nil, errors.New("connection refused (test)")
	}
	conn := amqptest.Dial(c.t)
	br, err := newAMQPBroker(conn)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, conn)
	return br, nil
}

// cut closes the current connection.
func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.conns[len(c.conns)-1].Close()
}

// cutWhen cuts the current connection each time the request's confirmed
// items pass the next of at, then returns.
func (c *cuttable) cutWhen(b *runBundle, request int64, at ...int) {
	for _, n := range at {
		for b.count(c.t, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, request) < n {
			time.Sleep(10 * time.Millisecond)
		}
		c.cut()
	}
}

func TestRunFailsOverWithinOneRun(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	const n = 150
	ids := b.seedN(t, 1, n)
	req := b.approved(t, NewRequest{Canary: intPtr(5), Rate: 60}, ids)
	c := &cuttable{t: t}
	first, err := c.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Pool: b.pool, Broker: first, Actor: "oncall", checkEvery: 50 * time.Millisecond, Consumers: fixedHandler{},
		Reconnect: c.open}
	var reported []Failover
	r.Progress = func(p Progress) { reported = p.Failovers }
	go c.cutWhen(b, req.ID, 20, 60)
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("run across two cuts: %+v, %v; want it completed in one run", res, err)
	}
	if len(res.Failovers) != 2 || len(reported) != 2 {
		t.Fatalf("failovers %+v (progress %d), want 2", res.Failovers, len(reported))
	}
	inFlight := 0
	for _, f := range res.Failovers {
		inFlight += f.InFlight
		if f.From == "" || f.To == "" || f.Cause == "" {
			t.Errorf("failover %+v does not name both nodes and the cause", f)
		}
	}
	got := runDrain(t, b.conn, b.queue, n, 10*time.Second)
	copies := map[int64]int{}
	for _, d := range got {
		copies[d.Headers[HeaderReplayItem].(int64)]++
	}
	if len(copies) != n || res.Confirmed != n {
		t.Errorf("%d distinct items reached the queue, %d confirmed; want all %d", len(copies), res.Confirmed, n)
	}
	if extra := len(got) - n; extra > inFlight || res.Republished > inFlight {
		t.Errorf("%d extra copies, %d republished, but only %d items were in flight at the cuts", extra, res.Republished, inFlight)
	}
	for action, want := range map[string]int{"replay.run.failover": 2, "replay.run.interrupted": 2, "replay.run.start": 3, "replay.complete": 1} {
		if got := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1 AND target = $2`, action, requestTarget(req.ID)); got != want {
			t.Errorf("%d %s rows, want %d", got, action, want)
		}
	}
	if got := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.canary.pass' AND target = $1`, requestTarget(req.ID)); got != 1 {
		t.Errorf("%d canary passes, want 1: a failover does not publish a second canary once the first passed", got)
	}
	t.Logf("%d items, 2 cuts: %d copies (%d in flight at the cuts), republished %d, failovers took %.3fs and %.3fs",
		n, len(got), inFlight, res.Republished, res.Failovers[0].Took, res.Failovers[1].Took)
}

func TestRunFailoverIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limit  int
		refuse bool
	}{
		{"no node answers", 5, true},
		{"too many failovers", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRun(t)
			ctx := context.Background()
			ids := b.seedN(t, 1, 150)
			req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 60}, ids)
			c := &cuttable{t: t}
			first, err := c.open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.refuse = tc.refuse
			r := &Runner{Pool: b.pool, Broker: first, Actor: "oncall", checkEvery: 50 * time.Millisecond, Consumers: fixedHandler{},
				Reconnect: c.open, maxFailovers: tc.limit, failoverWait: 700 * time.Millisecond}
			go c.cutWhen(b, req.ID, 20, 60)
			start := time.Now()
			res, err := r.Run(ctx, req.ID)
			var interrupted *InterruptedError
			if !errors.As(err, &interrupted) || !errors.As(err, new(*BrokerLostError)) {
				t.Fatalf("error = %v, want an interruption by a lost broker", err)
			}
			if got := b.status(t, req.ID); got.Status != StatusRunning {
				t.Errorf("status %s, want running: a resume goes on", got.Status)
			}
			if got := b.itemStates(t, req.ID)["confirmed"]; got != res.Confirmed || got >= 150 {
				t.Errorf("%d confirmed in the database, the run says %d", got, res.Confirmed)
			}
			wantFailovers := 0
			if !tc.refuse {
				wantFailovers = tc.limit
			}
			if len(res.Failovers) != wantFailovers {
				t.Errorf("%d failovers, want %d", len(res.Failovers), wantFailovers)
			}
			if got := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.interrupted' AND target = $1`, requestTarget(req.ID)); got != wantFailovers+1 {
				t.Errorf("%d interrupted rows, want %d", got, wantFailovers+1)
			}
			t.Logf("ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
			// The next run resumes and completes.
			res2, err := b.runner(t).Run(ctx, req.ID)
			if err != nil || res2.Status != StatusCompleted || res2.Confirmed != 150 {
				t.Fatalf("resume: %+v %v", res2, err)
			}
		})
	}
}

// TestRunFailoverKeepsWatchingOutcomes: the outcome watcher outlives a
// failover, so that the items confirmed through the lost node are watched
// to their terminal state like the rest, and the run completes on all of
// them.
func TestRunFailoverKeepsWatchingOutcomes(t *testing.T) {
	t.Parallel()
	// Each reservation reaches its terminal state 300 ms after its publish.
	b := setupRun(t, "outcome_query=SELECT CASE WHEN now() - $4 > interval '300 milliseconds' THEN now() END, false", "outcome_window=1m")
	ctx := context.Background()
	const n = 150
	ids := b.seedN(t, 1, n)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 60}, ids)
	c := &cuttable{t: t}
	first, err := c.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Pool: b.pool, Broker: first, Actor: "oncall", checkEvery: 50 * time.Millisecond, Consumers: fixedHandler{},
		Reconnect: c.open, outcomeEvery: 100 * time.Millisecond}
	go c.cutWhen(b, req.ID, 40)
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Status != StatusCompleted || len(res.Failovers) != 1 {
		t.Fatalf("run across a cut: %+v, %v; want it completed after one failover", res, err)
	}
	if o := res.Outcomes; o == nil || o.Watched != n || o.Terminal != n {
		t.Errorf("outcomes %+v, want all %d watched and terminal, those confirmed before the failover included", o, n)
	}
}
