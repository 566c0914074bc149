package broker_test

import (
	"context"
	"strconv"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/deadletter/sourcetest"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// TestDLQSourceConformance holds the RabbitMQ source to the suite every
// source driver passes.
func TestDLQSourceConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) sourcetest.Harness {
		conn := amqptest.Dial(t)
		queue := amqptest.Name(t, ".dlq")
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		amqptest.DeleteOnCleanup(t, []string{queue}, nil)
		return sourcetest.Harness{
			Publish: func(t *testing.T, bodies [][]byte) {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				defer ch.Close()
				if err := ch.Confirm(false); err != nil {
					t.Fatal(err)
				}
				for i, b := range bodies {
					c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false,
						amqp.Publishing{Body: b, Headers: amqp.Table{"seq": strconv.Itoa(i)}, ContentType: "application/json"})
					if err != nil {
						t.Fatal(err)
					}
					if ok, err := c.WaitContext(context.Background()); !ok || err != nil {
						t.Fatalf("publish %d not confirmed: %v", i, err)
					}
				}
			},
			Open: func(t *testing.T, prefetch int) sourcetest.Source {
				src, err := broker.OpenDLQSource(amqptest.Dial(t), queue, prefetch)
				if err != nil {
					t.Fatal(err)
				}
				return src
			},
			Seq: func(m deadletter.Message) (string, bool) {
				s, ok := m.Headers["seq"].(string)
				return s, ok
			},
		}
	})
}
