package replay

import (
	"context"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// TestReplayGoesBackToTheQueueThatFailed: beside the work queue, a tap
// (billing, an audit copy) is bound to the letters' original exchange by
// the same key. A replay goes back to the work queue alone; only a request
// that says --via-exchange copies it to the tap too, and its approver sees
// every queue that gets a copy, as the broker routes them.
func TestReplayGoesBackToTheQueueThatFailed(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	tap := amqptest.Name(t, ".tap")
	amqptest.DeleteOnCleanup(t, []string{tap}, nil)
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(tap, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(tap, "reservation.#", b.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()

	home := b.approved(t, NewRequest{Canary: intPtr(0)}, b.seedN(t, 1, 3))
	if res, err := b.runner(t).Run(ctx, home.ID); err != nil || res.Confirmed != 3 {
		t.Fatalf("default run: %+v, %v", res, err)
	}
	if got := runDrain(t, b.conn, b.queue, 3, 5*time.Second); len(got) != 3 {
		t.Errorf("%d replays in the work queue, want 3", len(got))
	} else if got[0].Exchange != "" || got[0].RoutingKey != b.queue {
		t.Errorf("a replay came through %q/%q, want the default exchange to %s", got[0].Exchange, got[0].RoutingKey, b.queue)
	}
	if n := readyIn(t, b.conn, tap); n != 0 {
		t.Errorf("the tap got %d copies of a default replay, want none", n)
	}

	via := b.pending(t, NewRequest{Canary: intPtr(0), ViaExchange: true}, b.seedN(t, 10, 3))
	if !via.ViaExchange || len(via.Targets) != 1 || via.Targets[0] != (Target{Exchange: b.exchange, RoutingKey: runKey, Letters: 3}) {
		t.Fatalf("via-exchange request: via %v, targets %+v", via.ViaExchange, via.Targets)
	}
	svc := b.as("bob")
	svc.Consumers = newManagement("")
	d, err := svc.Show(ctx, via.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var copies []string
	if d.Handler != nil && d.Handler.ConsumedNow != nil {
		for _, q := range d.Handler.ConsumedNow.Queues {
			copies = append(copies, q.Queue)
		}
	}
	want := []string{b.queue, tap}
	slices.Sort(copies)
	slices.Sort(want)
	if !slices.Equal(copies, want) {
		t.Errorf("the approver sees copies to %v, want %v", copies, want)
	}
	if _, err := b.as("bob").Approve(ctx, via.ID, ReviewOptions{Why: "ok", CohortHash: via.CohortHash}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.runner(t).Run(ctx, via.ID); err != nil || res.Confirmed != 3 {
		t.Fatalf("via-exchange run: %+v, %v", res, err)
	}
	if got := runDrain(t, b.conn, b.queue, 3, 5*time.Second); len(got) != 3 {
		t.Errorf("%d via-exchange replays in the work queue, want 3", len(got))
	}
	if got := runDrain(t, b.conn, tap, 3, 5*time.Second); len(got) != 3 {
		t.Errorf("%d via-exchange copies in the tap, want 3", len(got))
	}
}

// readyIn is how many messages queue holds now.
func readyIn(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}
