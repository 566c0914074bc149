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

// riverUserEnv names the login a run reaches a River database with: the
// letters' queue names carry none (river://HOST:PORT/DATABASE/QUEUE), and
// the password comes from riverjobs.PasswordEnv.
const riverUserEnv = "EXPIRYCTL_RIVER_USER"

// How an outage names a job store's server.
const (
	riverServer    = "River's database"
	redisServer    = "Redis"
	jobTableServer = "the jobs table's database"
)

// jobTableUserEnv names the login a run reaches a jobs table with.
const jobTableUserEnv = "EXPIRYCTL_JOBTABLE_USER"

// jobStore is one job-store driver as the commands reach it: how a --queue
// value names it, and how a capture and a run open it. The drivers share
// a shape, so a command names none of them.
type jobStore struct {
	system deadletter.System
	// server names what an outage lost; passwordEnv is where its
	// password is given rather than in a --queue value.
	server      string
	passwordEnv string
	isRef       func(string) bool
	// name is how letters name the queue ref names, without credentials,
	// and whether ref carries a password.
	name func(ref string) (name string, password bool, err error)
	// openSource opens the capture of ref's failed jobs.
	openSource func(ctx context.Context, ref string, prefetch int) (service.DLQSource, error)
	// server names the server a queue's jobs live on, one retrier each;
	// openRetrier opens that retrier, reaching it as login says.
	serverOf    func(queue string) (string, error)
	openRetrier func(ctx context.Context, queue string) (replay.Broker, error)
	// topology reads what the queue ref names holds now, by state.
	topology func(ctx context.Context, ref string) (deadletter.QueueReport, error)
	// unreachable tells a server that does not answer (to be waited for
	// by a followed capture) from a refusal.
	unreachable func(error) bool
}

// jobStoreEnv is what a job-store driver needs of the command's world:
// the environment (logins and passwords), and the approved mappings of
// jobs tables (the policy's job_tables), read only when a jobs table is
// opened.
type jobStoreEnv struct {
	getenv    func(string) string
	jobTables func(context.Context) (map[string]json.RawMessage, error)
}

// jobStores are the drivers.
func jobStores(env jobStoreEnv) []jobStore {
	getenv := env.getenv
	river := jobStore{
		system: deadletter.River, server: riverServer, passwordEnv: riverjobs.PasswordEnv, isRef: riverjobs.IsRef,
		name: func(ref string) (string, bool, error) {
			r, err := riverjobs.ParseRef(ref)
			if err != nil {
				return "", false, err
			}
			return r.Name(), dsn.HasPassword(ref), nil
		},
		openSource: func(ctx context.Context, ref string, prefetch int) (service.DLQSource, error) {
			r, err := riverjobs.ParseRef(withLogin(getenv, ref, riverUserEnv))
			if err != nil {
				return nil, &FlagError{Err: err}
			}
			return riverjobs.OpenSource(ctx, r, riverjobs.SourceOptions{Prefetch: prefetch})
		},
		serverOf: func(queue string) (string, error) {
			r, err := riverjobs.ParseRef(queue)
			if err != nil {
				return "", err
			}
			return r.DatabaseName(), nil
		},
		openRetrier: func(ctx context.Context, queue string) (replay.Broker, error) {
			r, err := riverjobs.ParseRef(withLogin(getenv, queue, riverUserEnv))
			if err != nil {
				return nil, err
			}
			return riverjobs.OpenRetrier(ctx, r, riverjobs.RetrierOptions{})
		},
		topology: func(ctx context.Context, ref string) (deadletter.QueueReport, error) {
			r, err := riverjobs.ParseRef(withLogin(getenv, ref, riverUserEnv))
			if err != nil {
				return deadletter.QueueReport{}, &FlagError{Err: err}
			}
			return riverjobs.Topology(ctx, r)
		},
		unreachable: store.Transient,
	}
	bull := jobStore{
		system: deadletter.BullMQ, server: redisServer, passwordEnv: bullmq.PasswordEnv, isRef: bullmq.IsRef,
		name: func(ref string) (string, bool, error) {
			r, err := bullmq.ParseRef(ref)
			if err != nil {
				return "", false, err
			}
			return r.Name(), dsn.HasPassword(ref), nil
		},
		openSource: func(ctx context.Context, ref string, prefetch int) (service.DLQSource, error) {
			r, err := bullmq.ParseRef(ref)
			if err != nil {
				return nil, &FlagError{Err: err}
			}
			return bullmq.OpenDialed(ctx, r, bullmq.SourceOptions{Prefetch: prefetch})
		},
		// One retrier reaches every Redis its letters name.
		serverOf: func(string) (string, error) { return "", nil },
		openRetrier: func(context.Context, string) (replay.Broker, error) {
			return bullmq.NewRetrier(bullmq.DialEnv), nil
		},
		topology: func(ctx context.Context, ref string) (deadletter.QueueReport, error) {
			r, err := bullmq.ParseRef(ref)
			if err != nil {
				return deadletter.QueueReport{}, &FlagError{Err: err}
			}
			return bullmq.Topology(ctx, r)
		},
		unreachable: bullmq.Unreachable,
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
		raw, ok := tables[ref.Name()]
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
		name: func(ref string) (string, bool, error) {
			r, err := jobtable.ParseRef(ref)
			if err != nil {
				return "", false, err
			}
			return r.Name(), dsn.HasPassword(ref), nil
		},
		openSource: func(ctx context.Context, ref string, prefetch int) (service.DLQSource, error) {
			r, err := jobtable.ParseRef(withLogin(getenv, ref, jobTableUserEnv))
			if err != nil {
				return nil, &FlagError{Err: err}
			}
			m, err := mapping(ctx, r)
			if err != nil {
				return nil, err
			}
			return jobtable.OpenSource(ctx, r.ConnString, m, jobtable.SourceOptions{Prefetch: prefetch})
		},
		// A retrier serves one table.
		serverOf: func(queue string) (string, error) { return queue, nil },
		openRetrier: func(ctx context.Context, queue string) (replay.Broker, error) {
			r, err := jobtable.ParseRef(withLogin(getenv, queue, jobTableUserEnv))
			if err != nil {
				return nil, err
			}
			m, err := mapping(ctx, r)
			if err != nil {
				return nil, err
			}
			return jobtable.OpenRetrier(ctx, r.ConnString, m, jobtable.RetrierOptions{})
		},
		topology: func(_ context.Context, ref string) (deadletter.QueueReport, error) {
			return deadletter.QueueReport{Unavailable: "a jobs table's live states are not read: its mapping names no state but the failed ones and the one a replay sets"}, nil
		},
		unreachable: store.Transient,
	}
	return []jobStore{river, bull, table}
}

// jobStoreOf is the driver whose --queue form ref has, if any.
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

// jobStoreNamed is the driver whose --queue form ref has, if any.
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
// when ref names none: a letter's queue name carries no credentials.
func withLogin(getenv func(string) string, ref, userEnv string) string {
	user := getenv(userEnv)
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || user == "" || strings.Contains(strings.SplitN(rest, "/", 2)[0], "@") {
		return ref
	}
	return scheme + "://" + url.User(user).String() + "@" + rest
}

// jobStoreSource opens the capture of the job store ref names.
func (f *Factory) jobStoreSource(s jobStore, ref string, prefetch int) (service.DLQSource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreLookup)
	defer cancel()
	return s.openSource(ctx, ref, prefetch)
}

// openJobStore completes runner for a request whose letters are a job
// store's: each job is retried where it is, through a retrier for each
// server the cohort's queues are on, and the run captures those queues to
// see its jobs fail again. A job store shows no traffic and no handler
// versions, so such a run is paced by its ceiling and starts only when its
// request says --same-handler-ok.
func (r *requestRunner) openJobStore(ctx context.Context, runner *replay.Runner, req replay.Request) (*replay.Runner, func(), error) {
	s, ok := r.jobStore(req.System())
	if !ok {
		return nil, nil, fmt.Errorf("replay request %d is for %s, which this expiryctl cannot reach", req.ID, req.System())
	}
	retriers := &jobRetriers{store: s}
	for _, t := range req.Targets {
		if _, err := retriers.forQueue(ctx, t.RoutingKey); err != nil {
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
// each server its queues are on, opened as a queue first needs it.
type jobRetriers struct {
	store jobStore
	mu    sync.Mutex
	open  map[string]replay.Broker
}

func (j *jobRetriers) forQueue(ctx context.Context, queue string) (replay.Broker, error) {
	server, err := j.store.serverOf(queue)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if b, ok := j.open[server]; ok {
		return b, nil
	}
	lookup, cancel := context.WithTimeout(ctx, jobStoreLookup)
	defer cancel()
	b, err := j.store.openRetrier(lookup, queue)
	if err != nil {
		return nil, err
	}
	if j.open == nil {
		j.open = map[string]replay.Broker{}
	}
	j.open[server] = b
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
