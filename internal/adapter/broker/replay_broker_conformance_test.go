package broker_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/replay/brokertest"
)

// TestAMQPBrokerConformance holds the RabbitMQ publisher to the suite
// every target driver passes.
func TestAMQPBrokerConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) brokertest.Harness {
		conn := amqptest.Dial(t)
		queue, missing := amqptest.Name(t, ".work"), amqptest.Name(t, ".missing")
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ch.Close() })
		if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		amqptest.DeleteOnCleanup(t, []string{queue}, nil)
		b, err := broker.NewAMQPBroker(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		// A returned message is matched to its publish by the item it
		// replays, as the runner's are.
		var item int64
		message := func(to string) func(body []byte, seq string) replay.Message {
			return func(body []byte, seq string) replay.Message {
				item++
				return replay.Message{Item: item, RoutingKey: to, Body: body,
					Headers: map[string]any{"seq": seq, replay.HeaderReplayItem: item},
					Wire:    deadletter.Properties{ContentType: "application/json", DeliveryMode: amqp.Persistent}}
			}
		}
		return brokertest.Harness{
			Broker: b, Message: message(queue),
			Missing: func(body []byte) replay.Message { return message(missing)(body, "") },
			Queue:   queue, MissingQueue: missing,
			Receive: func(t *testing.T, n int) []brokertest.Received {
				deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []brokertest.Received
				timeout := time.After(30 * time.Second)
				for len(got) < n {
					select {
					case d := <-deliveries:
						seq, _ := d.Headers["seq"].(string)
						got = append(got, brokertest.Received{Body: d.Body, Seq: seq})
						_ = d.Ack(false)
					case <-timeout:
						t.Fatalf("received %d of %d", len(got), n)
					}
				}
				return got
			},
		}
	})
}
