package broker_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestTargetConsumersReadsHandlerVersions builds a topic exchange whose
// bindings route a target to one queue (and, through an exchange-to-
// exchange binding, a second), with consumers on connections that
// advertise a handler-version or none, and decoys; it waits until the
// management API's statistics (refreshed every 5 s) show them.
func TestTargetConsumersReadsHandlerVersions(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	x, inner := amqptest.Name(t, ".x"), amqptest.Name(t, ".inner")
	work, audit, decoy, idle := amqptest.Name(t, ".work"), amqptest.Name(t, ".audit"), amqptest.Name(t, ".decoy"), amqptest.Name(t, ".idle")
	amqptest.DeleteOnCleanup(t, []string{work, audit, decoy, idle}, []string{x, inner})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, step := range []error{
		ch.ExchangeDeclare(x, amqp.ExchangeTopic, false, true, false, false, nil),
		ch.ExchangeDeclare(inner, amqp.ExchangeFanout, false, true, false, false, nil),
		declare(ch, work), declare(ch, audit), declare(ch, decoy), declare(ch, idle),
		ch.QueueBind(work, "reservation.*", x, false, nil),
		ch.QueueBind(decoy, "other.#", x, false, nil),
		ch.ExchangeBind(inner, "#.expire", x, false, nil),
		ch.QueueBind(audit, "", inner, false, nil),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	consume(t, work, amqp.Table{broker.HandlerVersionProperty: "2026.11.30-fix"})
	consume(t, work, nil) // a consumer that advertises nothing
	consume(t, decoy, amqp.Table{broker.HandlerVersionProperty: "decoy"})

	m := broker.NewManagement(broker.ManagementConfig{URL: testManagementURL(t), AMQPURL: amqptest.URL()})
	targets := []replay.Target{{Exchange: x, RoutingKey: "reservation.expire"}, {Exchange: "", RoutingKey: idle},
		{Exchange: "", RoutingKey: amqptest.Name(t, ".missing")}, {Exchange: amqptest.Name(t, ".nox"), RoutingKey: "k"}}
	var got []replay.QueueConsumers
	var byQueue map[string][]replay.Consumer
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err = m.TargetConsumers(context.Background(), targets)
		byQueue = map[string][]replay.Consumer{}
		for _, q := range got {
			byQueue[q.Queue] = q.Consumers
		}
		if err == nil && len(byQueue[work]) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TargetConsumers never showed the consumers: %+v, %v", got, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The bindings' order is the API's; each queue comes once.
	if len(got) != 3 || byQueue[audit] == nil || byQueue[idle] == nil || got[2].Queue != idle {
		t.Fatalf("queues %+v, want %s and %s (through %s), then %s", got, work, audit, inner, idle)
	}
	versions := []string{byQueue[work][0].HandlerVersion, byQueue[work][1].HandlerVersion}
	slices.Sort(versions)
	if !slices.Equal(versions, []string{"", "2026.11.30-fix"}) {
		t.Errorf("versions on %s: %q", work, versions)
	}
	if !strings.Contains(byQueue[work][0].Connection, "->") {
		t.Errorf("connection %q is not the broker's name for it", byQueue[work][0].Connection)
	}
	if len(byQueue[audit]) != 0 || len(byQueue[idle]) != 0 {
		t.Errorf("consumers on %s or %s, which have none: %+v", audit, idle, got)
	}
}

func TestTargetConsumersUnreachable(t *testing.T) {
	t.Parallel()
	m := broker.NewManagement(broker.ManagementConfig{URL: "http://ops:S3cretPW@127.0.0.1:1/", AMQPURL: amqptest.URL(), Timeout: time.Second})
	_, err := m.TargetConsumers(context.Background(), []replay.Target{{Exchange: "reservations", RoutingKey: "reservation.expire"}})
	if err == nil || strings.Contains(err.Error(), "S3cretPW") || !strings.Contains(err.Error(), "cannot reach RabbitMQ's management API") {
		t.Errorf("error = %v", err)
	}
}

func declare(ch *amqp.Channel, queue string) error {
	_, err := ch.QueueDeclare(queue, false, true, false, false, nil)
	return err
}

// consume opens a connection of its own with properties and consumes
// queue until the test ends.
func consume(t *testing.T, queue string, properties amqp.Table) {
	t.Helper()
	conn, err := amqp.DialConfig(amqptest.URL(), amqp.Config{Properties: properties})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(queue, "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}
