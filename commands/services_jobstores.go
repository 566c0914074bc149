package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// jobStoreLookup bounds reaching a job store: connecting and checking that
// it holds what expiryctl reads.
const jobStoreLookup = 30 * time.Second

// riverUserEnv names the login a River URL typed on the command line
// reaches its database with when the URL names none; the password comes
// from riverjobs.PasswordEnv.
const riverUserEnv = "EXPIRYCTL_RIVER_USER"

// How an outage names a job store's server.
const (
	riverServer    = "River's database"
	redisServer    = "Redis"
	jobTableServer = "the jobs table's database"
)

// jobTableUserEnv names the login a jobs table's URL typed on the
// command line reaches its database with.
const jobTableUserEnv = "EXPIRYCTL_JOBTABLE_USER"

// storeRef is a job-store driver's reference to one queue on one
// connection, with the credentials to reach it: what the drivers' Refs
// have in common.
type storeRef interface {
	// Name is the queue's name as letters carry it:
	// SYSTEM://CONNECTION/QUEUE, which names no server.
	Name() string
	// Server is where it reaches, HOST:PORT/DATABASE.
	Server() string
}

// jobStore is one job-store driver as the commands reach it: how a queue
// is named (as letters name it, and as a URL typed on the command line),
// and how a capture and a run open it. The drivers share a shape, so a
// command names none of them.
type jobStore struct {
	system deadletter.System
	// server names what an outage lost; passwordEnv is where the
	// password of a URL typed on the command line is given rather than
	// in the URL.
	server      string
	passwordEnv string
	isRef       func(string) bool
	// parseURL reads a URL typed on the command line into the reference
	// it reaches, named by config.DeriveName, and the queue's part of it
	// that refFor takes.
	parseURL func(arg string) (ref storeRef, queue string, err error)
	// splitName reads a queue's name as letters carry it into the
	// connection's name and the queue's part.
	splitName func(name string) (conn, queue string, err error)
	// refFor is queue on the connection c, logged in with password.
	refFor func(c config.Connection, password, queue string) (storeRef, error)
	// openSource opens the capture of ref's failed jobs.
	openSource func(ctx context.Context, ref storeRef, prefetch int) (service.DLQSource, error)
	// openRetrier opens the retrier of ref's connection; resolve finds
	// the reference of each queue a run's message names.
	openRetrier func(ctx context.Context, ref storeRef, resolve func(name string) (storeRef, error)) (replay.Broker, error)
	// oneRetrier says a single retrier reaches every connection (it
	// resolves each message's queue itself).
	oneRetrier bool
	// topology reads what ref's queue holds now, by state.
	topology func(ctx context.Context, ref storeRef) (deadletter.QueueReport, error)
	// unreachable tells a server that does not answer (to be waited for
	// by a followed capture) from a refusal; serverError also takes a
	// login the server refused: either is the server unavailable to the
	// command (exit 5).
	unreachable func(error) bool
	serverError func(error) bool
}

// jobStoreEnv is what a job-store driver needs of the command's world:
// the environment (logins and passwords of URLs typed on the command
// line), and the approved mappings of jobs tables (the policy's
// job_tables), read only when a jobs table is opened.
type jobStoreEnv struct {
	getenv    func(string) string
	jobTables func(context.Context) (map[string]json.RawMessage, error)
}

// jobStores are the drivers.
func jobStores(env jobStoreEnv) []jobStore {
	getenv := env.getenv
	river := jobStore{
		system: deadletter.River, server: riverServer, passwordEnv: riverjobs.PasswordEnv, isRef: riverjobs.IsRef,
		parseURL: func(arg string) (storeRef, string, error) {
			r, err := riverjobs.ParseRef(withLogin(getenv, arg, riverUserEnv))
			if err != nil {
				return nil, "", err
			}
			queue := url.PathEscape(r.Queue)
			if len(r.States) != 1 || r.States[0] != riverjobs.StateDiscarded {
				queue += "?states=" + strings.Join(r.States, ",")
			}
			return r, queue, nil
		},
		splitName: riverjobs.SplitName,
		refFor: func(c config.Connection, password, queue string) (storeRef, error) {
			return riverjobs.RefFor(c, password, queue)
		},
		openSource: func(ctx context.Context, ref storeRef, prefetch int) (service.DLQSource, error) {
			return riverjobs.OpenSource(ctx, ref.(riverjobs.Ref), riverjobs.SourceOptions{Prefetch: prefetch})
		},
		openRetrier: func(ctx context.Context, ref storeRef, _ func(string) (storeRef, error)) (replay.Broker, error) {
			return riverjobs.OpenRetrier(ctx, ref.(riverjobs.Ref), riverjobs.RetrierOptions{})
		},
		topology: func(ctx context.Context, ref storeRef) (deadletter.QueueReport, error) {
			return riverjobs.Topology(ctx, ref.(riverjobs.Ref))
		},
		unreachable: store.Transient, serverError: postgresServerError,
	}
	bull := jobStore{
		system: deadletter.BullMQ, server: redisServer, passwordEnv: bullmq.PasswordEnv, isRef: bullmq.IsRef,
		parseURL: func(arg string) (storeRef, string, error) {
			r, err := bullmq.ParseRef(arg)
			if err != nil {
				return nil, "", err
			}
			return r, url.PathEscape(r.Prefix) + "/" + url.PathEscape(r.Queue), nil
		},
		splitName: bullmq.SplitName,
		refFor: func(c config.Connection, password, queue string) (storeRef, error) {
			return bullmq.RefFor(c, password, queue)
		},
		openSource: func(ctx context.Context, ref storeRef, prefetch int) (service.DLQSource, error) {
			return bullmq.OpenDialed(ctx, ref.(bullmq.Ref), bullmq.SourceOptions{Prefetch: prefetch})
		},
		// One retrier reaches every connection its letters name.
		oneRetrier: true,
		openRetrier: func(_ context.Context, _ storeRef, resolve func(string) (storeRef, error)) (replay.Broker, error) {
			return bullmq.NewRetrier(func(name string) (bullmq.Ref, error) {
				r, err := resolve(name)
				if err != nil {
					return bullmq.Ref{}, err
				}
				return r.(bullmq.Ref), nil
			}), nil
		},
		topology: func(ctx context.Context, ref storeRef) (deadletter.QueueReport, error) {
			return bullmq.Topology(ctx, ref.(bullmq.Ref))
		},
		unreachable: bullmq.Unreachable, serverError: bullmq.ServerError,
	}
	// mapping is the approved mapping of the jobs table ref names.
	mapping := func(ctx context.Context, ref jobtable.Ref) (jobtable.Mapping, error) {
		if env.jobTables == nil {
			return jobtable.Mapping{}, fmt.Errorf("no mapping of jobs table %s can be read here", ref.Name())
		}
		tables, err := env.jobTables(ctx)
		if err != nil {
			return jobtable.Mapping{}, err
		}
		raw, ok := ref.MappingIn(tables)
		if !ok {
			return jobtable.Mapping{}, &replay.Refusal{Rule: "job-table-mapping", Message: fmt.Sprintf("jobs table %s has no approved mapping: "+
				"an admin proposes one with `expiryctl policy set job_tables=…` and a second admin approves it (docs/jobtable.md)", ref.Name())}
		}
		m, err := jobtable.ParseMapping(raw)
		if err != nil {
			return jobtable.Mapping{}, fmt.Errorf("the approved mapping of jobs table %s: %w", ref.Name(), err)
		}
		if m.Table != ref.Table {
			return jobtable.Mapping{}, fmt.Errorf("the approved mapping of jobs table %s names table %s", ref.Name(), m.Table)
		}
		return m, nil
	}
	table := jobStore{
		system: deadletter.JobTable, server: jobTableServer, passwordEnv: jobtable.PasswordEnv, isRef: jobtable.IsRef,
		parseURL: func(arg string) (storeRef, string, error) {
			r, err := jobtable.ParseRef(withLogin(getenv, arg, jobTableUserEnv))
			if err != nil {
				return nil, "", err
			}
			return r, r.Table, nil
		},
		splitName: jobtable.SplitName,
		refFor: func(c config.Connection, password, queue string) (storeRef, error) {
			return jobtable.RefFor(c, password, queue)
		},
		openSource: func(ctx context.Context, ref storeRef, prefetch int) (service.DLQSource, error) {
			r := ref.(jobtable.Ref)
			m, err := mapping(ctx, r)
			if err != nil {
				return nil, err
			}
			return jobtable.OpenSource(ctx, r, m, jobtable.SourceOptions{Prefetch: prefetch})
		},
		openRetrier: func(ctx context.Context, ref storeRef, _ func(string) (storeRef, error)) (replay.Broker, error) {
			r := ref.(jobtable.Ref)
			m, err := mapping(ctx, r)
			if err != nil {
				return nil, err
			}
			return jobtable.OpenRetrier(ctx, r, m, jobtable.RetrierOptions{})
		},
		topology: func(ctx context.Context, ref storeRef) (deadletter.QueueReport, error) {
			r := ref.(jobtable.Ref)
			m, err := mapping(ctx, r)
			if err != nil {
				return deadletter.QueueReport{Unavailable: err.Error()}, nil
			}
			return jobtable.Topology(ctx, r, m)
		},
		unreachable: store.Transient, serverError: postgresServerError,
	}
	return []jobStore{river, bull, table}
}

// postgresServerError says whether err is a PostgreSQL server of a job
// store that did not answer or refused the login.
func postgresServerError(err error) bool {
	return errors.As(err, new(*pgconn.ConnectError)) || store.ServerGone(err)
}

// serverFailure is err as the command reports it: a server that did not
// answer or refused the login is a *deadletter.ServerError (exit 5).
func (s jobStore) serverFailure(err error) error {
	if err != nil && s.serverError != nil && s.serverError(err) {
		return &deadletter.ServerError{Server: s.server, Err: err}
	}
	return err
}

// jobStoreOf is the driver whose queue names or URLs ref has the form of,
// if any.
func (f *Factory) jobStoreOf(ref string) (jobStore, bool) {
	return jobStoreNamed(ref, f.jobStoreEnv())
}

// jobStoreEnv gives the drivers the Factory's environment and the
// approved jobs-table mappings of its database.
func (f *Factory) jobStoreEnv() jobStoreEnv {
	return jobStoreEnv{getenv: f.Getenv, jobTables: func(ctx context.Context) (map[string]json.RawMessage, error) {
		pool, err := f.DB(ctx)
		if err != nil {
			return nil, err
		}
		pol, err := replay.LoadPolicy(ctx, pool)
		if err != nil {
			return nil, err
		}
		return pol.JobTables, nil
	}}
}

// jobStoreNamed is the driver whose queue names or URLs ref has the form
// of, if any.
func jobStoreNamed(ref string, env jobStoreEnv) (jobStore, bool) {
	for _, s := range jobStores(env) {
		if s.isRef(ref) {
			return s, true
		}
	}
	return jobStore{}, false
}

// jobStoreFor is the driver of system.
func (f *Factory) jobStoreFor(system deadletter.System) (jobStore, bool) {
	for _, s := range jobStores(f.jobStoreEnv()) {
		if s.system == system {
			return s, true
		}
	}
	return jobStore{}, false
}

// withLogin puts the login of the environment variable userEnv into ref
// when ref names none: a URL typed on the command line may leave it to
// the environment, never to the operating system's user.
func withLogin(getenv func(string) string, ref, userEnv string) string {
	user := getenv(userEnv)
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || user == "" || strings.Contains(strings.SplitN(rest, "/", 2)[0], "@") {
		return ref
	}
	return scheme + "://" + url.User(user).String() + "@" + rest
}

// typedQueue resolves a job store's queue as a person typed it on the
// command line (--queue, --work-queue) to its name as letters carry it,
// SYSTEM://CONNECTION/QUEUE:
//
//   - a name whose connection the configuration defines is that
//     connection's queue;
//   - a URL (river://USER@HOST:PORT/DATABASE/QUEUE, …) is the queue of the
//     configured connection whose server it reaches, else of a connection
//     of this process alone, named by config.DeriveName, which a note on
//     stderr says a replay will need in the configuration.
//
// Only what the person typed is dialled this way: a name that letters or
// requests carry goes through jobRef, which knows the configuration and
// what was typed, nothing else.
func (f *Factory) typedQueue(s jobStore, arg string) (string, error) {
	conn, named, nameErr := s.splitName(arg)
	if nameErr == nil {
		x, err := f.Context()
		if err != nil {
			return "", err
		}
		if _, ok := x.Connection(conn); ok {
			// The configured connection, with what the name's query says
			// of a capture (River's states), kept for this process.
			c, password, err := f.connectionNamed(s.system, conn)
			if err != nil {
				return "", err
			}
			ref, err := s.refFor(c, password, named)
			if err != nil {
				return "", &FlagError{Err: err}
			}
			f.typed(ref)
			return ref.Name(), nil
		}
	}
	ref, queue, err := s.parseURL(arg)
	if err != nil && nameErr == nil {
		// A connection's name the configuration does not define, and no
		// URL either: say so, as for a letter's.
		_, _, err = f.connectionNamed(s.system, conn)
		return "", err
	}
	if err != nil {
		return "", &FlagError{Err: err}
	}
	if dsn.HasPassword(arg) {
		fmt.Fprintf(f.IO.ErrOut, "warning: the queue's URL carries a password, which every user of this machine can read in the process list while the command runs: give it in %s, or name the connection in the configuration\n", s.passwordEnv)
	}
	for _, c := range f.configuredOfSystem(s.system) {
		password, err := f.secretOf(c)
		if err != nil {
			return "", err
		}
		configured, err := s.refFor(c, password, queue)
		if err == nil && configured.Server() == ref.Server() {
			f.typed(configured)
			return configured.Name(), nil
		}
	}
	f.typed(ref)
	conn, _, _ = s.splitName(ref.Name())
	fmt.Fprintf(f.IO.ErrOut, "note: no connection of the configuration reaches %s: its letters name the connection %q, "+
		"which a replay of them needs in the configuration (docs/configuration.md)\n", ref.Server(), conn)
	return ref.Name(), nil
}

// queueName is a --queue or --work-queue value as letters name its queue:
// a job store's through typedQueue, anything else as it was typed.
func (f *Factory) queueName(arg string) (string, error) {
	if s, ok := f.jobStoreOf(arg); ok {
		return f.typedQueue(s, arg)
	}
	return arg, nil
}

// typed remembers ref, reached by what a person typed on the command
// line, under its name, for jobRef to find for the rest of the process.
func (f *Factory) typed(ref storeRef) {
	f.jobStoreMu.Lock()
	defer f.jobStoreMu.Unlock()
	if f.typedRefs == nil {
		f.typedRefs = map[string]storeRef{}
	}
	f.typedRefs[ref.Name()] = ref
}

// jobRef is the reference, with the credentials to reach it, of the queue
// a letter, a request or a resolved flag names (SYSTEM://CONNECTION/QUEUE):
// the configuration's connection of that name, or one a person typed on
// this process's command line. Anything else is refused before anything
// connects, whatever server the name might seem to say.
func (f *Factory) jobRef(s jobStore, name string) (storeRef, error) {
	conn, queue, err := s.splitName(name)
	if err != nil {
		return nil, &replay.Refusal{Rule: "connection-unknown", Message: err.Error() + "; nothing was dialled"}
	}
	f.jobStoreMu.Lock()
	ref, ok := f.typedRefs[name]
	f.jobStoreMu.Unlock()
	if ok {
		return ref, nil
	}
	c, password, err := f.connectionNamed(s.system, conn)
	if err != nil {
		return nil, err
	}
	return s.refFor(c, password, queue)
}

// jobStoreSource opens the capture of the job store's queue name names.
func (f *Factory) jobStoreSource(s jobStore, name string, prefetch int) (service.DLQSource, error) {
	ref, err := f.jobRef(s, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreLookup)
	defer cancel()
	src, err := s.openSource(ctx, ref, prefetch)
	if err != nil {
		return nil, s.serverFailure(err)
	}
	f.adviseLogin(s, ref, src)
	return src, nil
}

// loginStander is a job store's source or retrier that says which login
// it reached its store as, and the ways that login holds around the
// store's own rules.
type loginStander interface {
	LoginStanding() (login string, kinds []string)
}

// adviseLogin says on stderr, once a connection, that a job store's
// connection logs in as a superuser or the owner of the store's table,
// as the advisory line of the archive's login does: such a login may
// change any job, and the store's docs name the least a login needs.
func (f *Factory) adviseLogin(s jobStore, ref storeRef, opened any) {
	stander, ok := opened.(loginStander)
	if !ok {
		return
	}
	login, kinds := stander.LoginStanding()
	if len(kinds) == 0 {
		return
	}
	conn, _, _ := s.splitName(ref.Name())
	f.jobStoreMu.Lock()
	defer f.jobStoreMu.Unlock()
	if f.advised == nil {
		f.advised = map[string]bool{}
	}
	if f.advised[conn] {
		return
	}
	f.advised[conn] = true
	fmt.Fprintf(f.IO.ErrOut, "warning: connection %q logs in as %s (%s): use a login with only the grants docs/%s.md names\n",
		conn, login, strings.Join(kinds, ", "), s.system)
}

// openJobStore completes runner for a request whose letters are a job
// store's: each job is retried where it is, through a retrier for each
// connection the cohort's queues are on, and the run captures those
// queues to see its jobs fail again. A job store shows no traffic and no
// handler versions, so such a run is paced by its ceiling and starts only
// when its request says --same-handler-ok.
func (r *requestRunner) openJobStore(ctx context.Context, runner *replay.Runner, req replay.Request) (*replay.Runner, func(), error) {
	s, ok := r.jobStore(req.System())
	if !ok {
		return nil, nil, fmt.Errorf("replay request %d is for %s, which this expiryctl cannot reach", req.ID, req.System())
	}
	retriers := &jobRetriers{store: s, resolve: r.jobRef, advise: r.adviseLogin}
	for _, t := range req.Targets {
		queue := t.RoutingKey
		b, err := retriers.forQueue(ctx, queue)
		if err == nil {
			// A store that tells a queue it does not know from an empty one
			// says so before the first retry, for every target.
			if checker, ok := b.(interface {
				CheckQueue(context.Context, string) error
			}); ok {
				err = checker.CheckQueue(ctx, queue)
			}
		}
		if err != nil {
			_ = retriers.Close()
			return nil, nil, err
		}
	}
	// The consumers stay the services': BullMQ's workers can be read
	// (without versions), River's and a jobs table's cannot, which the
	// handler check says without asking.
	runner.Broker, runner.Flow = retriers, nil
	runner.OpenDLQ = r.openDLQ
	return runner, func() { _ = retriers.Close() }, nil
}

// jobRetriers is the run's replay.Broker over a job store: a retrier for
// each connection its queues are on, opened as a queue first needs it.
type jobRetriers struct {
	store   jobStore
	resolve func(s jobStore, name string) (storeRef, error)
	advise  func(s jobStore, ref storeRef, opened any)
	mu      sync.Mutex
	open    map[string]replay.Broker
}

func (j *jobRetriers) forQueue(ctx context.Context, queue string) (replay.Broker, error) {
	ref, err := j.resolve(j.store, queue)
	if err != nil {
		return nil, err
	}
	key, _, _ := j.store.splitName(ref.Name())
	if j.store.oneRetrier {
		key = ""
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if b, ok := j.open[key]; ok {
		return b, nil
	}
	lookup, cancel := context.WithTimeout(ctx, jobStoreLookup)
	defer cancel()
	b, err := j.store.openRetrier(lookup, ref, func(name string) (storeRef, error) { return j.resolve(j.store, name) })
	if err != nil {
		return nil, j.store.serverFailure(err)
	}
	if j.advise != nil {
		j.advise(j.store, ref, b)
	}
	if j.open == nil {
		j.open = map[string]replay.Broker{}
	}
	j.open[key] = b
	return b, nil
}

func (j *jobRetriers) Publish(ctx context.Context, m replay.Message) (replay.Pending, error) {
	b, err := j.forQueue(ctx, m.RoutingKey)
	if err != nil {
		return nil, err
	}
	return b.Publish(ctx, m)
}

func (j *jobRetriers) ExchangeExists(_ context.Context, exchange string) (bool, error) {
	return exchange == "", nil
}

func (j *jobRetriers) QueueDepth(ctx context.Context, queue string) (int, bool, error) {
	b, err := j.forQueue(ctx, queue)
	if err != nil {
		return 0, false, err
	}
	return b.QueueDepth(ctx, queue)
}

func (j *jobRetriers) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	for _, b := range j.open {
		errs = append(errs, b.Close())
	}
	j.open = nil
	return errors.Join(errs...)
}
