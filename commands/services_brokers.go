package commands

import (
	"context"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

// brokerNamed is the driver.Broker whose queue names or URLs ref has the
// form of, if any.
func brokerNamed(ref string) (driver.Broker, bool) {
	for _, b := range registry.Brokers() {
		if b.IsRef(ref) {
			return b, true
		}
	}
	return nil, false
}

// brokerFor is the driver.Broker of system, if it is one.
func brokerFor(system deadletter.System) (driver.Broker, bool) {
	for _, b := range registry.Brokers() {
		if b.Traits().System == system {
			return b, true
		}
	}
	return nil, false
}

// brokerConnection is the connection of b's system a command reaches: the
// context's one, or, when it defines none, the implicit one the driver
// says the system's own configuration stands in for.
func (f *Factory) brokerConnection(b driver.Broker) (config.Connection, error) {
	x, err := f.Context()
	if err != nil {
		return config.Connection{}, err
	}
	c, configured, err := onlyOfSystem(x, b.Traits().System, b.Traits().DefaultConnection)
	if err != nil {
		return config.Connection{}, err
	}
	if !configured {
		c.Where = b.Words().Implicit
	}
	return c, nil
}

// brokerSource receives the queue ref names on b's system, holding up to
// prefetch letters not yet stored.
func (f *Factory) brokerSource(b driver.Broker, ref string, prefetch int) (service.DLQSource, error) {
	if err := b.CheckRef(ref); err != nil {
		return nil, &FlagError{Err: err}
	}
	conn, err := f.brokerConnection(b)
	if err != nil {
		return nil, err
	}
	src, err := b.OpenSource(context.Background(), conn, ref, prefetch)
	if err != nil && b.Unreachable(err) {
		// As a job store's opener does (serverFailure): exit 5.
		return nil, &deadletter.ServerError{Server: b.Words().Server, Err: err}
	}
	return src, err
}

// openBroker completes runner for a request whose letters came from b's
// system: it sends copies through the connection of the letters' name,
// and captures the dead-letter queues of its cohort there. A system that
// shows no consumers and no traffic paces a run by its ceiling alone, and
// its run starts only when its request says --same-handler-ok.
func (r *requestRunner) openBroker(runner *replay.Runner, b driver.Broker) (*replay.Runner, func(), error) {
	conn, err := r.publishConnection(b.Traits().System)
	if err != nil {
		return nil, nil, err
	}
	publisher, err := b.OpenPublisher(conn)
	if err != nil {
		return nil, nil, err
	}
	runner.Broker, runner.Flow, runner.Consumers = publisher, nil, nil
	runner.OpenDLQ = r.openDLQ
	return runner, func() { _ = publisher.Close() }, nil
}

// brokerTopology reads what the queue workQueue names and its dead-letter
// queue hold now, through the context's connection of its system; what
// cannot be reached shows in the report's Unavailable. ok is false for a
// name no driver.Broker's queues have the form of.
func (f *Factory) brokerTopology(ctx context.Context, workQueue string) (report deadletter.QueueReport, ok bool, err error) {
	b, ok := brokerNamed(workQueue)
	if !ok {
		return deadletter.QueueReport{}, false, nil
	}
	conn, err := f.brokerConnection(b)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, true, nil
	}
	report, err = b.Topology(ctx, conn, workQueue)
	return report, true, err
}
