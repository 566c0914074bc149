package broker_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// TestQueueFlowCountsRetriesApart drives a work queue and its retry queue
// on the real broker: 20 jobs/s published into the work queue, 20/s into
// the retry queue, whose TTL dead-letters them back into the work queue,
// and a consumer acking everything. The management API must show the work
// queue's publishes without the returning retries (R), the retries as the
// retry queue's publishes, and both in the deliveries and acks; asked by
// the retry queue's name, QueueFlow reads the work queue.
func TestQueueFlowCountsRetriesApart(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	work := amqptest.Name(t, ".work")
	retry := work + ".retry.200"
	amqptest.DeleteOnCleanup(t, []string{work, retry}, nil)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(work, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(retry, false, false, false, false, amqp.Table{
		"x-message-ttl": int32(200), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": work}); err != nil {
		t.Fatal(err)
	}
	consumer, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := consumer.Consume(work, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			_ = d.Ack(false)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_ = ch.PublishWithContext(ctx, "", work, false, false, amqp.Publishing{Body: []byte("job")})
			_ = ch.PublishWithContext(ctx, "", retry, false, false, amqp.Publishing{Body: []byte("retry")})
		}
	}()

	m := broker.NewManagement(broker.ManagementConfig{AMQPURL: amqptest.URL()})
	near := func(got, want float64) bool { return math.Abs(got-want) <= want/4 }
	deadline := time.Now().Add(40 * time.Second)
	for {
		f, err := m.QueueFlow(context.Background(), retry)
		if err != nil {
			t.Fatal(err)
		}
		if f.Unavailable != "" {
			t.Fatalf("unavailable: %s", f.Unavailable)
		}
		if f.Queue == work && f.RetryQueues == 1 && f.Consumers == 1 && near(f.PublishRate, 20) && near(f.RetryPublishRate, 20) &&
			near(f.DeliverRate, 40) && near(f.AckRate, 40) {
			t.Logf("flow %+v", f)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow %+v: want publish ≈20/s (retries not counted), retry publish ≈20/s, deliver and ack ≈40/s", f)
		}
		time.Sleep(time.Second)
	}
}

func TestQueueFlowOfAMissingQueue(t *testing.T) {
	t.Parallel()
	m := broker.NewManagement(broker.ManagementConfig{AMQPURL: amqptest.URL()})
	f, err := m.QueueFlow(context.Background(), amqptest.Name(t, ".nowhere.retry.1000"))
	if err != nil || f.Unavailable == "" || !strings.Contains(f.Unavailable, "has no queue") {
		t.Fatalf("flow %+v, %v", f, err)
	}
}
