package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/expiryctl/expiryctl/audit"
)

// Failover is one move of a run to another node of the broker after it
// lost the one it published through.
type Failover struct {
	// At is when the loss was noticed.
	At time.Time `json:"at"`
	// From and To name the nodes (their addresses, never a password);
	// empty when the broker does not say (see NodeNamer).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Cause is why the lost node's channel ended.
	Cause string `json:"cause"`
	// InFlight counts the items sent through the lost node whose confirm
	// never came: they stay publishing and go out again through the new
	// one, where the job's idempotency key absorbs a copy that did arrive.
	InFlight int `json:"in_flight"`
	// Took is from the loss to publishing again, in seconds.
	Took float64 `json:"took_seconds"`
}

// NodeNamer is a Broker that names the node it publishes through, for a
// failover's messages and audit rows.
type NodeNamer interface {
	Node() string
}

func nodeOf(b Broker) string {
	if n, ok := b.(NodeNamer); ok {
		return n.Node()
	}
	return ""
}

// brokerLoss is a leg of a run that ended because its broker was lost,
// with what the next leg needs: it is never returned from Run.
type brokerLoss struct {
	cause    error
	unsent   []int64
	inFlight int
	// node is the lost node's name (see NodeNamer). The outcome watcher,
	// still running, goes on in the next leg through st.watch.
	node string
}

func (l *brokerLoss) Error() string { return l.cause.Error() }

func (r *Runner) failoverLimit() int {
	if r.maxFailovers > 0 {
		return r.maxFailovers
	}
	return 5
}

func (r *Runner) failoverPatience() time.Duration {
	if r.failoverWait > 0 {
		return r.failoverWait
	}
	return 30 * time.Second
}

// canFailover says whether err, which ends a leg of st's run, is a lost
// broker the run may go on from on another node: there is a way to get one
// (Reconnect) and the run has failed over fewer than its limit.
func (r *Runner) canFailover(st *runState, err error) bool {
	return r.Reconnect != nil && errors.As(err, new(*BrokerLostError)) && len(st.failovers) < r.failoverLimit()
}

// replayAcrossFailovers runs the replay and, each time it loses its broker
// and may fail over, goes on through another node: one run, one lock, one
// approval. Each leg resumes as a second `replay run` would: the items whose
// confirm never came are published again (nothing was marked confirmed
// without an ack), the items marked and never sent go back to pending, and
// the database starts the leg again (replay_run_start, which checks the
// lock and the handler and audits the resume).
func (r *Runner) replayAcrossFailovers(ctx context.Context, st *runState) error {
	for {
		err := r.replay(ctx, st)
		loss, ok := errors.AsType[*brokerLoss](err)
		if !ok {
			return err
		}
		if err := r.failover(ctx, st, loss); err != nil {
			st.stopWatch()
			return err
		}
	}
}

// failover moves st's run to another node after loss: it records the
// interruption (putting the unsent items back), asks Reconnect for a broker
// until one answers or the patience runs out, audits the move and starts
// the next leg in the database. An error is the run's end, an
// *InterruptedError that names the command to resume it.
func (r *Runner) failover(ctx context.Context, st *runState, loss *brokerLoss) error {
	lostAt := r.now()
	f := Failover{At: lostAt, From: loss.node, Cause: audit.ErrorText(loss.cause), InFlight: loss.inFlight}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	details := map[string]any{"error": f.Cause, "published": st.published, "republished": st.republished,
		"unconfirmed": loss.inFlight, "confirmed": st.confirmed, "skipped": st.skipped, "failed": st.failed,
		"failing_over_from": f.From, "failover": len(st.failovers) + 1}
	err := r.tables().RunInterrupted(bg, r.Actor, st.req.ID, loss.unsent, details)
	cancel()
	if err != nil {
		// PostgreSQL is gone too: the run cannot go on, nor say so.
		return &InterruptedError{RequestID: st.req.ID, Unconfirmed: loss.inFlight, Unsent: len(loss.unsent),
			Err: errors.Join(loss.cause, fmt.Errorf("record the interruption: %w", err))}
	}
	next, err := r.reconnect(ctx)
	if err != nil {
		return &InterruptedError{RequestID: st.req.ID, Unconfirmed: loss.inFlight,
			Err: fmt.Errorf("%w; failing over to another node failed: %w", loss.cause, err)}
	}
	r.Broker = next
	f.To = nodeOf(next)
	f.Took = math.Round(r.now().Sub(lostAt).Seconds()*1000) / 1000
	if err := r.resumeLeg(ctx, st, f); err != nil {
		return &InterruptedError{RequestID: st.req.ID, Unconfirmed: loss.inFlight,
			Err: fmt.Errorf("%w; resuming through node %s failed: %w", loss.cause, f.To, err)}
	}
	st.failovers = append(st.failovers, f)
	r.report(st, "failover")
	return nil
}

// reconnect asks Reconnect for a broker, again after a failed try (waits
// from a quarter second doubling to 5 s, ±50 %), until one answers or
// failoverPatience has passed since the first try.
func (r *Runner) reconnect(ctx context.Context) (Broker, error) {
	waits := retry.WithMaxDuration(r.failoverPatience(),
		retry.WithJitterPercent(50, retry.WithCappedDuration(5*time.Second, retry.NewExponential(250*time.Millisecond))))
	for try := 1; ; try++ {
		b, err := r.Reconnect(ctx)
		if err == nil {
			return b, nil
		}
		wait, stop := waits.Next()
		if stop || ctx.Err() != nil {
			return nil, fmt.Errorf("no node answered within %s (%d tries): %w", r.failoverPatience(), try, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// resumeLeg starts the next leg of st's run in the database, as a resumed
// run starts: replay_run_start checks that this session still holds the
// runner lock and that the consumers seen now pass the handler check, and
// audits the resume; the request, policy and item counts are read again.
// What this run counted of itself (publishes, failures, the re-dead base)
// stays, so the stop conditions judge the whole run. The failover's own
// audit row comes first, naming both nodes.
func (r *Runner) resumeLeg(ctx context.Context, st *runState, f Failover) error {
	if err := audit.Record(ctx, r.Pool, audit.Entry{Actor: r.Actor, Action: "replay.run.failover", Target: requestTarget(st.req.ID),
		Details: map[string]any{"from": f.From, "to": f.To, "cause": f.Cause, "in_flight": f.InFlight,
			"took_seconds": f.Took, "failover": len(st.failovers) + 1}}); err != nil {
		return err
	}
	if _, _, err := st.lock.status(ctx); err != nil {
		return err
	}
	var seen *Observation
	if r.Consumers != nil || !st.req.SameHandlerOK {
		obs := r.observe(ctx, st.req)
		seen = &obs
	}
	// The captures of the cohort's dead-letter queues reconnect by
	// themselves, on the node the cluster has left.
	watched, err := st.dlqs.observation()
	if err != nil {
		return err
	}
	return inTx(ctx, r.Pool, func(t tables) error {
		resumed, label, err := t.RunStart(ctx, r.Actor, st.req.ID, seen, watched)
		if err != nil {
			return err
		}
		if !resumed {
			return fmt.Errorf("replay request %d was not running when its run failed over", st.req.ID)
		}
		st.label = label
		if st.req, err = t.RequestGet(ctx, st.req.ID); err != nil {
			return err
		}
		if st.pol, err = t.PolicyGet(ctx); err != nil {
			return err
		}
		states, err := t.ItemsCountByState(ctx, st.req.ID)
		if err != nil {
			return err
		}
		st.confirmed, st.skipped, st.failed = states["confirmed"], states["skipped"], states["failed"]
		st.maxOrdinal, err = t.ItemsMaxOrdinal(ctx, st.req.ID)
		return err
	})
}
