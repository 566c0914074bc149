package broker

import (
	"context"
	"fmt"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

var _ replay.Flow = (*Management)(nil)

// QueueFlow implements replay.Flow: one read of the topology of the work
// queue that queue belongs to (see replay.WorkQueueOf), summed into the work
// queue's traffic and its retry queues' publishes.
func (m *Management) QueueFlow(ctx context.Context, queue string) (replay.QueueFlow, error) {
	work := replay.WorkQueueOf(queue)
	flow := replay.QueueFlow{Queue: work}
	report, err := m.Topology(ctx, work)
	if err != nil || report.Unavailable != "" {
		flow.Unavailable = report.Unavailable
		return flow, err
	}
	found := false
	for _, q := range report.Queues {
		switch q.Role {
		case deadletter.RoleWork:
			found = true
			flow.Ready, flow.Consumers = q.Ready, q.Consumers
			flow.PublishRate, flow.DeliverRate, flow.AckRate = orZero(q.PublishRate), orZero(q.DeliverRate), orZero(q.AckRate)
		case deadletter.RoleRetry:
			flow.RetryQueues++
			flow.RetryPublishRate += orZero(q.PublishRate)
		}
	}
	if !found {
		flow.Unavailable = m.redact(fmt.Sprintf("vhost %q at %s has no queue %s (only its retry or dead-letter queues): check the queue's name",
			m.vhost, m.shown, work))
	}
	return flow, nil
}

// orZero reads a rate the broker did not report as 0: it reports none for
// a queue nothing moved through since it began sampling.
func orZero(rate *float64) float64 {
	if rate == nil {
		return 0
	}
	return *rate
}
