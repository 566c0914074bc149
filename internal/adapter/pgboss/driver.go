package pgboss

import (
	"context"
	"fmt"
	"net/url"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// UserEnv names the login a pg-boss URL typed on the command line reaches
// its database with when the URL names none.
const UserEnv = "EXPIRYCTL_PGBOSS_USER"

// Driver is pg-boss as the core reaches it (package driver).
var Driver driver.JobStore = pgbossDriver{}

type pgbossDriver struct{}

func (pgbossDriver) Traits() driver.Traits {
	return driver.Traits{System: System, QueuePrefix: QueuePrefix, RetriesInPlace: true,
		NamesConnectionInQueue: true, Evidence: driver.NoConsumers}
}

func (pgbossDriver) Words() driver.Words {
	return driver.Words{Title: "pg-boss", Server: "pg-boss's database", ServerLabel: "pgboss", Doc: "docs/pgboss.md",
		QueueForm: "pgboss://CONNECTION/QUEUE", Captures: "the jobs pg-boss failed for good in QUEUE",
		URLForm: "pgboss://USER@HOST[:PORT]/DATABASE/QUEUE[?schema=NAME]", PasswordEnv: PasswordEnv, UserEnv: UserEnv,
		ConsumersUnseen: "pg-boss shows no handler versions: its workers fetch jobs from the table, and pg-boss 12's instance registry " +
			"(SCHEMA.instance, which an application may turn off) names the queues they work but not the handler they run"}
}

func (pgbossDriver) Config() config.Rules { return ConfigRules }

func (pgbossDriver) IsRef(s string) bool { return IsRef(s) }

// ParseURL gives the queue's part as a letter's name carries it
// (path-escaped); pg-boss's schema stays the reference's, which RefFor
// takes from a configured connection's URL. A URL that names no login,
// and no EXPIRYCTL_PGBOSS_USER either, is refused here, before anything
// is dialled.
func (pgbossDriver) ParseURL(arg string, env driver.Env) (driver.Ref, string, error) {
	r, err := ParseRef(driver.WithLogin(env.Getenv, arg, UserEnv))
	if err != nil {
		return nil, "", err
	}
	if err := r.Login(); err != nil {
		return nil, "", fmt.Errorf("%w, or set %s", err, UserEnv)
	}
	return r, url.PathEscape(r.Queue), nil
}

func (pgbossDriver) SplitName(name string) (string, string, error) { return SplitName(name) }

func (pgbossDriver) RefFor(c config.Connection, password, queue string) (driver.Ref, error) {
	return RefFor(c, password, queue)
}

func (pgbossDriver) OpenSource(ctx context.Context, ref driver.Ref, _ driver.Env, prefetch int) (driver.Source, error) {
	src, err := OpenSource(ctx, ref.(Ref), SourceOptions{Prefetch: prefetch})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (pgbossDriver) OpenRetrier(ctx context.Context, ref driver.Ref, _ driver.Env, _ func(string) (driver.Ref, error)) (replay.Broker, error) {
	r, err := OpenRetrier(ctx, ref.(Ref), RetrierOptions{})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (pgbossDriver) OneRetrier() bool { return false }

// Consumers is nil: see Words.ConsumersUnseen. pg-boss 12's instance
// registry could count a queue's workers, but a count of nobody would be
// wrong for every application that turns registration off, and the
// handler check needs versions, which pg-boss does not record.
func (pgbossDriver) Consumers(func(string) (driver.Ref, error)) replay.Consumers { return nil }

func (pgbossDriver) Topology(ctx context.Context, ref driver.Ref, _ driver.Env) (deadletter.QueueReport, error) {
	return Topology(ctx, ref.(Ref))
}

func (pgbossDriver) Unreachable(err error) bool { return store.Unreachable(err) }

func (pgbossDriver) ServerError(err error) bool { return store.Unavailable(err) }
