package replay

import "context"

// fixedHandler says that every target routes to one queue with one
// consumer on a handler version no cohort failed under: the runner tests
// that are not about the handler check run as if the fix were deployed.
type fixedHandler struct{}

func (fixedHandler) TargetConsumers(_ context.Context, targets []Target) ([]QueueConsumers, error) {
	out := []QueueConsumers{}
	for _, t := range targets {
		out = append(out, QueueConsumers{Queue: t.String(), Consumers: []Consumer{{Tag: "test", HandlerVersion: "fixed-in-test"}}})
	}
	return out, nil
}
