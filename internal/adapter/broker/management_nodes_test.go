package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// TestManagementNodesGoOnToANodeThatAnswers: with the first node's API
// down, every read comes from the next, and a list of nodes none of which
// answers says why for the first.
func TestManagementNodesGoOnToANodeThatAnswers(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	work := amqptest.Name(t, ".work")
	amqptest.DeleteOnCleanup(t, []string{work}, nil)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(work, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	down := broker.ManagementConfig{URL: "http://guest:S3cretPW@127.0.0.1:1/", AMQPURL: amqptest.URL()}
	up := broker.ManagementConfig{URL: testManagementURL(t), AMQPURL: amqptest.URL()}
	ctx := context.Background()

	m := broker.NewManagementNodes([]broker.ManagementConfig{down, up})
	for range 2 {
		report, err := m.Topology(ctx, work)
		if err != nil || report.Unavailable != "" || len(report.Queues) != 1 || report.Queues[0].Name != work {
			t.Fatalf("Topology through the second node = %+v, %v", report, err)
		}
	}
	flow, err := m.QueueFlow(ctx, work)
	if err != nil || flow.Unavailable != "" || flow.Queue != work {
		t.Errorf("QueueFlow through the second node = %+v, %v", flow, err)
	}
	if _, err := m.TargetConsumers(ctx, []replay.Target{{RoutingKey: work}}); err != nil {
		t.Errorf("TargetConsumers through the second node: %v", err)
	}

	none := broker.NewManagementNodes([]broker.ManagementConfig{down, down})
	report, err := none.Topology(ctx, work)
	if err != nil || !strings.Contains(report.Unavailable, "cannot reach RabbitMQ's management API at http://127.0.0.1:1/") ||
		strings.Contains(report.Unavailable, "S3cretPW") {
		t.Errorf("no node answering: %+v, %v", report, err)
	}
}
