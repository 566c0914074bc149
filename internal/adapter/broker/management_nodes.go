package broker

import (
	"context"
	"sync/atomic"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

var (
	_ replay.Flow      = (*ManagementNodes)(nil)
	_ replay.Consumers = (*ManagementNodes)(nil)
)

// ManagementNodes reads the management API of a cluster through whichever
// of its nodes answers: each read goes to the node that answered last,
// and on to the next ones while a node gives no usable answer (down,
// refusing, not the management plugin). The management API shows the
// whole cluster from any node, so any answer will do. It is safe for
// concurrent use, like Management.
type ManagementNodes struct {
	nodes []*Management
	// last is the index of the node that answered last.
	last atomic.Int32
}

// NewManagementNodes returns a reader over one Management per config, in
// the order to try them; with none it reads the default broker's.
func NewManagementNodes(cfgs []ManagementConfig) *ManagementNodes {
	if len(cfgs) == 0 {
		cfgs = []ManagementConfig{{AMQPURL: DefaultURL}}
	}
	m := &ManagementNodes{}
	for _, cfg := range cfgs {
		m.nodes = append(m.nodes, NewManagement(cfg))
	}
	return m
}

// ask calls read on the nodes from the last that answered, until one
// answers ok, and returns that answer, or the first node's when none
// does. A caller that gave up (ctx) ends it.
func ask[T any](ctx context.Context, m *ManagementNodes, read func(*Management) (T, error), ok func(T, error) bool) (T, error) {
	start := int(m.last.Load())
	var first T
	var firstErr error
	for k := range m.nodes {
		i := (start + k) % len(m.nodes)
		v, err := read(m.nodes[i])
		if ok(v, err) {
			m.last.Store(int32(i))
			return v, err
		}
		if k == 0 {
			first, firstErr = v, err
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
	}
	return first, firstErr
}

// Topology implements service.LiveQueues through the first node that
// answers with the queues.
func (m *ManagementNodes) Topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error) {
	return ask(ctx, m, func(n *Management) (deadletter.QueueReport, error) { return n.Topology(ctx, workQueue) },
		func(r deadletter.QueueReport, err error) bool { return err == nil && r.Unavailable == "" })
}

// QueueFlow implements replay.Flow through the first node that answers.
func (m *ManagementNodes) QueueFlow(ctx context.Context, queue string) (replay.QueueFlow, error) {
	return ask(ctx, m, func(n *Management) (replay.QueueFlow, error) { return n.QueueFlow(ctx, queue) },
		func(f replay.QueueFlow, err error) bool { return err == nil && f.Unavailable == "" })
}

// TargetConsumers implements replay.Consumers through the first node that
// answers.
func (m *ManagementNodes) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	return ask(ctx, m, func(n *Management) ([]replay.QueueConsumers, error) { return n.TargetConsumers(ctx, targets) },
		func(_ []replay.QueueConsumers, err error) bool { return err == nil })
}

// Nodes are the readers of each node, in the order tried.
func (m *ManagementNodes) Nodes() []*Management { return m.nodes }
