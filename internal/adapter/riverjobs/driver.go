package riverjobs

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// UserEnv names the login a River URL typed on the command line reaches
// its database with when the URL names none.
const UserEnv = "EXPIRYCTL_RIVER_USER"

// QueuePrefix begins the name of every queue of the system as letters
// carry it: the system, "://", the connection's name, "/" and the queue.
const QueuePrefix = "river://"

// Driver is River as the core reaches it (package driver).
var Driver driver.JobStore = riverDriver{}

type riverDriver struct{}

func (riverDriver) Traits() driver.Traits {
	return driver.Traits{System: System, QueuePrefix: QueuePrefix, RetriesInPlace: true,
		NamesConnectionInQueue: true, Evidence: driver.NoConsumers}
}

func (riverDriver) Words() driver.Words {
	return driver.Words{Title: "River", Server: "River's database", ServerLabel: "river", Doc: "docs/river.md",
		QueueForm: "river://CONNECTION/QUEUE", Captures: "the jobs River discarded in QUEUE",
		URLForm: "river://USER@HOST[:PORT]/DATABASE/QUEUE[?states=discarded,cancelled]", PasswordEnv: PasswordEnv, UserEnv: UserEnv,
		ConsumersUnseen: "River shows no workers of a queue, nor their versions: its clients take jobs from the table without registering as consumers"}
}

func (riverDriver) Config() config.Rules { return ConfigRules }

func (riverDriver) IsRef(s string) bool { return IsRef(s) }

// ParseURL keeps a capture's states other than discarded in the queue's
// part (?states=), for RefFor to read again.
func (riverDriver) ParseURL(arg string, env driver.Env) (driver.Ref, string, error) {
	r, err := ParseRef(driver.WithLogin(env.Getenv, arg, UserEnv))
	if err != nil {
		return nil, "", err
	}
	if err := r.Login(); err != nil {
		return nil, "", fmt.Errorf("%w, or set %s", err, UserEnv)
	}
	queue := url.PathEscape(r.Queue)
	if len(r.States) != 1 || r.States[0] != StateDiscarded {
		queue += "?states=" + strings.Join(r.States, ",")
	}
	return r, queue, nil
}

func (riverDriver) SplitName(name string) (string, string, error) { return SplitName(name) }

func (riverDriver) RefFor(c config.Connection, password, queue string) (driver.Ref, error) {
	return RefFor(c, password, queue)
}

func (riverDriver) OpenSource(ctx context.Context, ref driver.Ref, _ driver.Env, prefetch int) (driver.Source, error) {
	src, err := OpenSource(ctx, ref.(Ref), SourceOptions{Prefetch: prefetch})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (riverDriver) OpenRetrier(ctx context.Context, ref driver.Ref, _ driver.Env, _ func(string) (driver.Ref, error)) (replay.Broker, error) {
	r, err := OpenRetrier(ctx, ref.(Ref), RetrierOptions{})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (riverDriver) OneRetrier() bool { return false }

func (riverDriver) Consumers(func(string) (driver.Ref, error)) replay.Consumers { return nil }

func (riverDriver) Topology(ctx context.Context, ref driver.Ref, _ driver.Env) (deadletter.QueueReport, error) {
	return Topology(ctx, ref.(Ref))
}

func (riverDriver) Unreachable(err error) bool { return store.Unreachable(err) }

func (riverDriver) ServerError(err error) bool { return store.Unavailable(err) }
