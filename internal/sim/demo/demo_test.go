package demo_test

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/sim/demo"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
)

func TestRunStagesTheIncident(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	conn := amqptest.Dial(t)
	topo := worker.NewTopology(amqptest.Name(t, ""))
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())
	ctx := context.Background()

	var out bytes.Buffer
	res, err := demo.Run(ctx, demo.Deps{Pool: db.Pool, AMQP: conn, Out: &out, Topology: topo})
	if err != nil {
		t.Fatalf("demo.Run: %v\n%s", err, out.String())
	}
	t.Logf("progress:\n%s", out.String())

	wantCategories := map[deadletter.Category]int{
		deadletter.BrokerExpired:      3,
		deadletter.NotFound:           3,
		deadletter.Conflict:           3,
		deadletter.Validation:         3,
		deadletter.Malformed:          4,
		deadletter.TransientExhausted: 5,
	}
	if !maps.Equal(res.ByCategory, wantCategories) {
		t.Errorf("ByCategory = %v, want %v", res.ByCategory, wantCategories)
	}
	if res.Published != 37 || res.Processed != 16 || res.Retried != 13 || res.DeadLettered != 21 {
		t.Errorf("published %d, processed %d, retried %d, dead-lettered %d; want 37, 16, 13, 21",
			res.Published, res.Processed, res.Retried, res.DeadLettered)
	}
	if res.Elapsed > 60*time.Second || res.DeadLetterQueue != topo.DeadLetterQueue {
		t.Errorf("elapsed %s into %s", res.Elapsed, res.DeadLetterQueue)
	}
	if !strings.Contains(out.String(), "done in") || strings.ContainsRune(out.String(), '\x1b') {
		t.Errorf("progress output lacks the summary or carries an escape sequence:\n%s", out.String())
	}

	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	letters := drain(t, ch, topo.DeadLetterQueue)
	classes, reasons := map[string]int{}, map[string]int{}
	for _, d := range letters {
		if !strings.Contains(d.MessageId, res.RunID) {
			t.Errorf("dead letter %q is not from run %s", d.MessageId, res.RunID)
		}
		if class, ok := d.Headers[worker.HeaderErrorClass].(string); ok {
			classes[class]++
			if d.Headers[worker.HeaderOriginalExchange] != topo.Exchange || d.Headers[worker.HeaderOriginalRoutingKey] != topo.RoutingKey {
				t.Errorf("%s: origin headers %v / %v", d.MessageId, d.Headers[worker.HeaderOriginalExchange], d.Headers[worker.HeaderOriginalRoutingKey])
			}
			history, _ := d.Headers[worker.HeaderAttemptHistory].([]any)
			if want := map[bool]int{true: 3, false: 1}[class == worker.ClassDBTimeout]; len(history) != want {
				t.Errorf("%s (%s): %d attempts in history, want %d", d.MessageId, class, len(history), want)
			}
			continue
		}
		deaths, _ := d.Headers["x-death"].([]any)
		if len(deaths) != 1 {
			t.Errorf("%s: no error class and x-death %v", d.MessageId, d.Headers["x-death"])
			continue
		}
		death, _ := deaths[0].(amqp.Table)
		if death["queue"] != topo.Queue {
			t.Errorf("%s: died in %v, want %s", d.MessageId, death["queue"], topo.Queue)
		}
		reason, _ := death["reason"].(string)
		reasons[reason]++
	}
	wantClasses := map[string]int{worker.ClassNotFound: 3, worker.ClassVersionConflict: 3, worker.ClassValidation: 3, worker.ClassDBTimeout: 5}
	if !maps.Equal(classes, wantClasses) {
		t.Errorf("x-error-class mix %v, want %v", classes, wantClasses)
	}
	if wantReasons := map[string]int{"rejected": 4, "expired": 3}; !maps.Equal(reasons, wantReasons) {
		t.Errorf("x-death reasons of broker-made letters %v, want %v", reasons, wantReasons)
	}

	var releases, stillHeld int
	if err := db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM reservations.capacity_releases),
			(SELECT count(*) FROM reservations.reservations WHERE id LIKE '%-outage' AND status = 'held')`).Scan(&releases, &stillHeld); err != nil {
		t.Fatal(err)
	}
	if releases != 11 || stillHeld != 5 {
		t.Errorf("%d capacity releases and %d outage holds left, want 11 (8 healthy jobs, 3 that survived a deadlock) and 5",
			releases, stillHeld)
	}

	// The demo's replays watch the reference worker's reservations, once:
	// the second run finds the policy set and changes nothing.
	pol, err := replay.LoadPolicy(ctx, db.Pool)
	if err != nil || pol.OutcomeQuery != worker.OutcomeQuery || pol.OutcomeWindow != time.Minute {
		t.Errorf("policy after the demo (%v): outcome query %q window %s, want the reference worker's", err, pol.OutcomeQuery, pol.OutcomeWindow)
	}
	policySets := func() int {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'policy.set'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	setsBefore := policySets()

	// A second run beside the first stages a second incident.
	res2, err := demo.Run(ctx, demo.Deps{Pool: db.Pool, AMQP: conn, Topology: topo})
	if err != nil {
		t.Fatalf("second demo.Run: %v", err)
	}
	if res2.RunID == res.RunID || res2.DeadLettered != 21 {
		t.Errorf("second run %s dead-lettered %d, want a new run id and 21", res2.RunID, res2.DeadLettered)
	}
	if n := len(drain(t, ch, topo.DeadLetterQueue)); n != 21 {
		t.Errorf("second run left %d dead letters, want 21", n)
	}
	if n := policySets(); n != setsBefore {
		t.Errorf("the second run changed the policy again (%d policy.set rows, want %d)", n, setsBefore)
	}
}

func TestRunRefusesABusyQueue(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	conn := amqptest.Dial(t)
	topo := worker.NewTopology(amqptest.Name(t, ""))
	amqptest.DeleteOnCleanup(t, topo.Queues(), topo.Exchanges())
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := worker.DeclareTopology(ch, topo); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(topo.Queue, "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	_, err = demo.Run(context.Background(), demo.Deps{Pool: db.Pool, AMQP: conn, Topology: topo})
	if err == nil || !strings.Contains(err.Error(), "1 consumers") {
		t.Fatalf("demo.Run beside another consumer = %v, want a refusal naming the consumer", err)
	}
}

// drain takes every message off queue.
func drain(t *testing.T, ch *amqp.Channel, queue string) []amqp.Delivery {
	t.Helper()
	var got []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			return got
		}
		got = append(got, d)
	}
}
