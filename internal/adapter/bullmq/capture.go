package bullmq

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// DialedSource is a Source on a Redis connection of its own, which Close
// releases with it: what a command that names a queue by reference opens.
type DialedSource struct {
	*Source
	client *redis.Client
}

// OpenDialed dials ref's Redis and opens a source on its queue.
func OpenDialed(ctx context.Context, ref Ref, opts SourceOptions) (*DialedSource, error) {
	client := Dial(ref)
	src, err := OpenSource(ctx, client, ref, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return &DialedSource{Source: src, client: client}, nil
}

// Close closes the source, then its connection.
func (d *DialedSource) Close() error {
	return errors.Join(d.Source.Close(), d.client.Close())
}

// Unreachable reports whether err is Redis not answering (refused, reset,
// timed out, closed), which a followed capture waits out, rather than a
// refusal (a wrong password, an unsupported BullMQ version).
func Unreachable(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case err == nil:
		return false
	case errors.As(err, &netErr), errors.As(err, &opErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}

// Topology reads what ref's queue holds now as the states of work `dlq
// summary` shows: waiting, paused and prioritized jobs are ready and
// active ones in flight, with the connected workers as its consumers;
// delayed jobs wait out a backoff (BullMQ's retry queue); failed ones are
// isolated, as a dead-letter queue's. The oldest ready job's wait and the
// oldest failed job's age are their head ages (headAges). BullMQ keeps no
// rates. A Redis that
// cannot be reached is not an error: the report's Unavailable says so, as
// it says of a queue that does not exist under which prefix Redis holds
// one of that name (QueueNotFoundError).
func Topology(ctx context.Context, ref Ref) (deadletter.QueueReport, error) {
	client := Dial(ref)
	defer client.Close()
	c, err := ref.Counts(ctx, client)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	if !c.Exists {
		return deadletter.QueueReport{Unavailable: notFound(ctx, client, ref).Error()}, nil
	}
	workers, err := ref.Workers(ctx, client)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	readyAge, failedAge, err := headAges(ctx, client, ref)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	name := ref.Name()
	return deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: name, Role: deadletter.RoleWork, Ready: int64(c.Waiting + c.Paused + c.Prioritized), Unacked: int64(c.Active), Consumers: len(workers),
			HeadAge: readyAge},
		{Name: name + " (delayed)", Role: deadletter.RoleRetry, Ready: int64(c.Delayed)},
		{Name: name + " (failed)", Role: deadletter.RoleDeadLetter, Ready: int64(c.Failed), HeadAge: failedAge},
	}}, nil
}

// Consumers is the handler check's reader of BullMQ's workers
// (replay.Consumers): each target queue with the workers connected to it,
// which advertise no handler version. A queue no worker serves shows with
// none, so that a run does not send jobs nobody takes.
type Consumers struct {
	// Resolve finds a target's Redis by its queue's name, through the
	// operator's configuration.
	Resolve Resolve
}

// TargetConsumers implements replay.Consumers.
func (c Consumers) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	out := make([]replay.QueueConsumers, 0, len(targets))
	for _, t := range targets {
		ref, err := c.Resolve(t.RoutingKey)
		if err != nil {
			return nil, err
		}
		client := Dial(ref)
		workers, err := ref.Workers(ctx, client)
		_ = client.Close()
		if err != nil {
			return nil, err
		}
		q := replay.QueueConsumers{Queue: ref.Name(), Consumers: make([]replay.Consumer, len(workers))}
		for i, w := range workers {
			q.Consumers[i] = replay.Consumer{Tag: w.Name, Connection: w.Addr}
		}
		out = append(out, q)
	}
	return out, nil
}
