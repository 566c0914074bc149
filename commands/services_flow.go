package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// flow is the reader of the target queues' traffic that replay's plan and
// runner pace by: the management API of LiveQueues. It dials nothing until
// asked.
func (f *Factory) flow() replay.Flow {
	return f.management()
}

// Planner returns the service that sizes a replay's rate against the
// consumers' headroom.
func (f *Factory) Planner(ctx context.Context) (service.Planner, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	return &planner{s}, nil
}

// planner is service.Planner over replay.Service.Plan with the management
// API as its flow.
type planner struct{ *services }

func (p *planner) Plan(ctx context.Context, id int64, opts replay.PlanOptions) (replay.Plan, error) {
	return p.requests().Plan(ctx, id, systemFlow{measured: p.flow}, opts)
}

// systemFlow reads a queue's traffic from the system that holds it: from
// measured where the system's live view measures it (Traits.Rates), else
// the answer says the system shows none.
type systemFlow struct{ measured replay.Flow }

func (s systemFlow) QueueFlow(ctx context.Context, queue string) (replay.QueueFlow, error) {
	switch d := driverOfQueue(queue); {
	case !d.Traits().Rates:
		return replay.QueueFlow{Queue: queue, Unavailable: d.Words().Title + " shows no traffic of a queue: only the queue's depth can be read"}, nil
	case s.measured == nil:
		return replay.QueueFlow{Queue: queue, Unavailable: "not configured"}, nil
	}
	return s.measured.QueueFlow(ctx, queue)
}
