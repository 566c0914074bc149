package jobtable

import (
	"context"
	"fmt"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// UserEnv names the login a jobs table's URL typed on the command line
// reaches its database with when the URL names none.
const UserEnv = "EXPIRYCTL_JOBTABLE_USER"

// QueuePrefix begins the name of every queue of the system as letters
// carry it: the system, "://", the connection's name, "/" and the queue.
const QueuePrefix = "jobtable://"

// Driver is a team's own jobs table as the core reaches it (package
// driver). It reads a table only through the mapping of its columns a
// second person approved (driver.Env.Approved).
var Driver driver.JobStore = tableDriver{}

type tableDriver struct{}

func (tableDriver) Traits() driver.Traits {
	return driver.Traits{System: System, QueuePrefix: QueuePrefix, RetriesInPlace: true,
		NamesConnectionInQueue: true, Evidence: driver.NoConsumers}
}

func (tableDriver) Words() driver.Words {
	return driver.Words{Title: "jobs table", Server: "the jobs table's database", ServerLabel: "jobtable", Doc: "docs/jobtable.md",
		QueueForm: "jobtable://CONNECTION/SCHEMA.TABLE",
		Captures:  "a team's jobs table's failed rows, through its approved mapping",
		URLForm:   "jobtable://USER@HOST[:PORT]/DATABASE/SCHEMA.TABLE", PasswordEnv: PasswordEnv, UserEnv: UserEnv,
		ConsumersUnseen: "a jobs table shows no workers, nor their versions: its poller takes rows without registering as a consumer"}
}

func (tableDriver) Config() config.Rules { return ConfigRules }

func (tableDriver) IsRef(s string) bool { return IsRef(s) }

func (tableDriver) ParseURL(arg string, env driver.Env) (driver.Ref, string, error) {
	r, err := ParseRef(driver.WithLogin(env.Getenv, arg, UserEnv))
	if err != nil {
		return nil, "", err
	}
	if err := r.Login(); err != nil {
		return nil, "", fmt.Errorf("%w, or set %s", err, UserEnv)
	}
	return r, r.Table, nil
}

func (tableDriver) SplitName(name string) (string, string, error) { return SplitName(name) }

func (tableDriver) RefFor(c config.Connection, password, queue string) (driver.Ref, error) {
	return RefFor(c, password, queue)
}

func (tableDriver) OpenSource(ctx context.Context, ref driver.Ref, env driver.Env, prefetch int) (driver.Source, error) {
	r := ref.(Ref)
	m, err := approvedMapping(ctx, r, env)
	if err != nil {
		return nil, err
	}
	src, err := OpenSource(ctx, r, m, SourceOptions{Prefetch: prefetch})
	if err != nil {
		return nil, err
	}
	return src, nil
}

func (tableDriver) OpenRetrier(ctx context.Context, ref driver.Ref, env driver.Env, _ func(string) (driver.Ref, error)) (replay.Broker, error) {
	r := ref.(Ref)
	m, err := approvedMapping(ctx, r, env)
	if err != nil {
		return nil, err
	}
	ret, err := OpenRetrier(ctx, r, m, RetrierOptions{})
	if err != nil {
		return nil, err
	}
	return ret, nil
}

func (tableDriver) OneRetrier() bool { return false }

func (tableDriver) Consumers(func(string) (driver.Ref, error)) replay.Consumers { return nil }

// Topology of a table with no approved mapping says why it cannot be
// read, rather than failing the whole view.
func (tableDriver) Topology(ctx context.Context, ref driver.Ref, env driver.Env) (deadletter.QueueReport, error) {
	r := ref.(Ref)
	m, err := approvedMapping(ctx, r, env)
	if err != nil {
		return deadletter.QueueReport{Unavailable: err.Error()}, nil
	}
	return Topology(ctx, r, m)
}

func (tableDriver) Unreachable(err error) bool { return store.Unreachable(err) }

func (tableDriver) ServerError(err error) bool { return store.Unavailable(err) }

// approvedMapping is the mapping of ref's table that a second person
// approved, from the policy's job_tables.
func approvedMapping(ctx context.Context, ref Ref, env driver.Env) (Mapping, error) {
	if env.Approved == nil {
		return Mapping{}, fmt.Errorf("no mapping of jobs table %s can be read here", ref.Name())
	}
	tables, err := env.Approved(ctx)
	if err != nil {
		return Mapping{}, err
	}
	raw, ok := ref.MappingIn(tables)
	if !ok {
		return Mapping{}, &store.Refusal{Rule: "job-table-mapping", Message: fmt.Sprintf("jobs table %s has no approved mapping: "+
			"an admin proposes one with `expiryctl policy set job_tables=…` and a second admin approves it (docs/jobtable.md)", ref.Name())}
	}
	m, err := ParseMapping(raw)
	if err != nil {
		return Mapping{}, fmt.Errorf("the approved mapping of jobs table %s: %w", ref.Name(), err)
	}
	if m.Table != ref.Table {
		return Mapping{}, fmt.Errorf("the approved mapping of jobs table %s names table %s", ref.Name(), m.Table)
	}
	return m, nil
}
