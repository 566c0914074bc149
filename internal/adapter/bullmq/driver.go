package bullmq

import (
	"context"
	"net/url"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/replay"
)

// QueuePrefix begins the name of every queue of the system as letters
// carry it: the system, "://", the connection's name, "/" and the queue.
const QueuePrefix = "bullmq://"

// Driver is BullMQ as the core reaches it (package driver).
var Driver driver.JobStore = bullDriver{}

type bullDriver struct{}

// Traits: BullMQ's workers can be read, without the handler each runs.
func (bullDriver) Traits() driver.Traits {
	return driver.Traits{System: System, QueuePrefix: QueuePrefix, RetriesInPlace: true,
		NamesConnectionInQueue: true, Evidence: driver.Consumers}
}

func (bullDriver) Words() driver.Words {
	return driver.Words{Title: "BullMQ", Server: "Redis", ServerLabel: "redis", Doc: "docs/bullmq.md",
		QueueForm: "bullmq://CONNECTION/PREFIX/QUEUE", Captures: "a BullMQ queue's failed set",
		URLForm: "bullmq://HOST[:PORT]/DB/PREFIX/QUEUE", PasswordEnv: PasswordEnv,
		ConsumersUnseen: "BullMQ shows the Workers of a queue but not which handler each runs: nothing can tell a fixed handler from the one that failed"}
}

func (bullDriver) Config() config.Rules { return ConfigRules }

func (bullDriver) IsRef(s string) bool { return IsRef(s) }

func (bullDriver) ParseURL(arg string, _ driver.Env) (driver.Ref, string, error) {
	r, err := ParseRef(arg)
	if err != nil {
		return nil, "", err
	}
	return r, url.PathEscape(r.Prefix) + "/" + url.PathEscape(r.Queue), nil
}

func (bullDriver) SplitName(name string) (string, string, error) { return SplitName(name) }

func (bullDriver) RefFor(c config.Connection, password, queue string) (driver.Ref, error) {
	return RefFor(c, password, queue)
}

func (bullDriver) OpenSource(ctx context.Context, ref driver.Ref, _ driver.Env, prefetch int) (driver.Source, error) {
	src, err := OpenDialed(ctx, ref.(Ref), SourceOptions{Prefetch: prefetch})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// OpenRetrier opens one retrier for every connection its letters name:
// it resolves each message's queue itself.
func (bullDriver) OpenRetrier(_ context.Context, _ driver.Ref, _ driver.Env, resolve func(string) (driver.Ref, error)) (replay.Broker, error) {
	return NewRetrier(refOf(resolve)), nil
}

func (bullDriver) OneRetrier() bool { return true }

// Consumers reads the workers connected to each target's queue, which
// say no handler version.
func (bullDriver) Consumers(resolve func(string) (driver.Ref, error)) replay.Consumers {
	return Consumers{Resolve: refOf(resolve)}
}

// refOf is resolve for BullMQ's own references.
func refOf(resolve func(string) (driver.Ref, error)) Resolve {
	return func(name string) (Ref, error) {
		r, err := resolve(name)
		if err != nil {
			return Ref{}, err
		}
		return r.(Ref), nil
	}
}

func (bullDriver) Topology(ctx context.Context, ref driver.Ref, _ driver.Env) (deadletter.QueueReport, error) {
	return Topology(ctx, ref.(Ref))
}

func (bullDriver) Unreachable(err error) bool { return Unreachable(err) }

func (bullDriver) ServerError(err error) bool { return ServerError(err) }
