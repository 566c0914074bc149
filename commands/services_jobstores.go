package commands

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
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

// riverServer is how an outage names a River database.
const riverServer = "River's database"

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

// jobStores are the drivers, reaching their servers with the logins
// getenv gives.
func jobStores(getenv func(string) string) []jobStore {
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
	return []jobStore{river}
}

// jobStoreOf is the driver whose --queue form ref has, if any.
func (f *Factory) jobStoreOf(ref string) (jobStore, bool) {
	return jobStoreNamed(ref, f.Getenv)
}

// jobStoreNamed is the driver whose --queue form ref has, if any,
// reaching its server with the logins getenv gives.
func jobStoreNamed(ref string, getenv func(string) string) (jobStore, bool) {
	for _, s := range jobStores(getenv) {
		if s.isRef(ref) {
			return s, true
		}
	}
	return jobStore{}, false
}

// jobStoreFor is the driver of system.
func (f *Factory) jobStoreFor(system deadletter.System) (jobStore, bool) {
	for _, s := range jobStores(f.Getenv) {
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
// see its jobs fail again. A job store shows no traffic, and River none
// of its workers, so such a run is paced by its ceiling and starts only
// when its request says --same-handler-ok.
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
	runner.Broker, runner.Flow, runner.Consumers = retriers, nil, nil
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
