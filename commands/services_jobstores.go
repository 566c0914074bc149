package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/replay"
)

// jobStoreLookup bounds reaching a job store: connecting and checking that
// it holds what expiryctl reads.
const jobStoreLookup = 30 * time.Second

// jobStore is one job-store driver as the commands reach it (package
// driver): the commands name none of them.
type jobStore = driver.JobStore

// storeRef is a job-store driver's reference to one queue on one
// connection, with the credentials to reach it.
type storeRef = driver.Ref

// serverFailure is err as the command reports it: a server that did not
// answer or refused the login is a *deadletter.ServerError (exit 5).
func serverFailure(s jobStore, err error) error {
	if err != nil && s.ServerError(err) {
		return &deadletter.ServerError{Server: s.Words().Server, Err: err}
	}
	return err
}

// jobStoreOf is the driver whose queue names or URLs ref has the form of,
// if any.
func (f *Factory) jobStoreOf(ref string) (jobStore, bool) {
	return jobStoreNamed(ref)
}

// jobStoreEnv gives the drivers the Factory's environment and the
// approved jobs-table mappings of its database.
func (f *Factory) jobStoreEnv() driver.Env {
	return driver.Env{Getenv: f.Getenv, Approved: func(ctx context.Context) (map[string]json.RawMessage, error) {
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
func jobStoreNamed(ref string) (jobStore, bool) {
	for _, s := range registry.JobStores() {
		if s.IsRef(ref) {
			return s, true
		}
	}
	return nil, false
}

// jobStoreFor is the driver of system.
func jobStoreFor(system deadletter.System) (jobStore, bool) {
	for _, s := range registry.JobStores() {
		if s.Traits().System == system {
			return s, true
		}
	}
	return nil, false
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
	conn, named, nameErr := s.SplitName(arg)
	if nameErr == nil {
		x, err := f.Context()
		if err != nil {
			return "", err
		}
		if _, ok := x.Connection(conn); ok {
			// The configured connection, with what the name's query says
			// of a capture (River's states), kept for this process.
			c, password, err := f.connectionNamed(s.Traits().System, conn)
			if err != nil {
				return "", err
			}
			ref, err := s.RefFor(c, password, named)
			if err != nil {
				return "", &FlagError{Err: err}
			}
			f.typed(ref)
			return ref.Name(), nil
		}
	}
	ref, queue, err := s.ParseURL(arg, f.jobStoreEnv())
	if err != nil && nameErr == nil {
		// A connection's name the configuration does not define, and no
		// URL either: say so, as for a letter's.
		_, _, err = f.connectionNamed(s.Traits().System, conn)
		return "", err
	}
	if err != nil {
		return "", &FlagError{Err: err}
	}
	if dsn.HasPassword(arg) {
		fmt.Fprintf(f.IO.ErrOut, "warning: the queue's URL carries a password, which every user of this machine can read in the process list while the command runs: give it in %s, or name the connection in the configuration\n", s.Words().PasswordEnv)
	}
	for _, c := range f.configuredOfSystem(s.Traits().System) {
		password, err := f.secretOf(c)
		if err != nil {
			return "", err
		}
		configured, err := s.RefFor(c, password, queue)
		if err == nil && configured.Server() == ref.Server() {
			f.typed(configured)
			return configured.Name(), nil
		}
	}
	f.typed(ref)
	conn, _, _ = s.SplitName(ref.Name())
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
	conn, queue, err := s.SplitName(name)
	if err != nil {
		return nil, &replay.Refusal{Rule: "connection-unknown", Message: err.Error() + "; nothing was dialled"}
	}
	f.jobStoreMu.Lock()
	ref, ok := f.typedRefs[name]
	f.jobStoreMu.Unlock()
	if ok {
		return ref, nil
	}
	c, password, err := f.connectionNamed(s.Traits().System, conn)
	if err != nil {
		return nil, err
	}
	return s.RefFor(c, password, queue)
}

// jobStoreSource opens the capture of the job store's queue name names.
func (f *Factory) jobStoreSource(s jobStore, name string, prefetch int) (service.DLQSource, error) {
	ref, err := f.jobRef(s, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobStoreLookup)
	defer cancel()
	src, err := s.OpenSource(ctx, ref, f.jobStoreEnv(), prefetch)
	if err != nil {
		return nil, serverFailure(s, err)
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
	conn, _, _ := s.SplitName(ref.Name())
	f.jobStoreMu.Lock()
	defer f.jobStoreMu.Unlock()
	if f.advised == nil {
		f.advised = map[string]bool{}
	}
	if f.advised[conn] {
		return
	}
	f.advised[conn] = true
	fmt.Fprintf(f.IO.ErrOut, "warning: connection %q logs in as %s (%s): use a login with only the grants %s names\n",
		conn, login, strings.Join(kinds, ", "), s.Words().Doc)
}

// openJobStore completes runner for a request whose letters are a job
// store's: each job is retried where it is, through a retrier for each
// connection the cohort's queues are on, and the run captures those
// queues to see its jobs fail again. A job store shows no traffic and no
// handler versions, so such a run is paced by its ceiling and starts only
// when its request says --same-handler-ok.
func (r *requestRunner) openJobStore(ctx context.Context, runner *replay.Runner, req replay.Request) (*replay.Runner, func(), error) {
	s, ok := jobStoreFor(req.System())
	if !ok {
		return nil, nil, fmt.Errorf("replay request %d is for %s, which this expiryctl cannot reach", req.ID, req.System())
	}
	retriers := &jobRetriers{store: s, env: r.env, resolve: r.jobRef, advise: r.adviseLogin}
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
	// The consumers stay the services': a driver reads a store's workers
	// where they can be read (without versions), and says why not where
	// they cannot, which the handler check says without asking.
	runner.Broker, runner.Flow = retriers, nil
	runner.OpenDLQ = r.openDLQ
	return runner, func() { _ = retriers.Close() }, nil
}

// jobRetriers is the run's replay.Broker over a job store: a retrier for
// each connection its queues are on, opened as a queue first needs it.
type jobRetriers struct {
	store   jobStore
	env     driver.Env
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
	key, _, _ := j.store.SplitName(ref.Name())
	if j.store.OneRetrier() {
		key = ""
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if b, ok := j.open[key]; ok {
		return b, nil
	}
	lookup, cancel := context.WithTimeout(ctx, jobStoreLookup)
	defer cancel()
	b, err := j.store.OpenRetrier(lookup, ref, j.env, func(name string) (storeRef, error) { return j.resolve(j.store, name) })
	if err != nil {
		return nil, serverFailure(j.store, err)
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

// jobStoresHelp is what `dlq ingest --help` says of the job stores, each
// in its driver's words.
func jobStoresHelp() string {
	var b strings.Builder
	b.WriteString(`A job store keeps its failed jobs in place, and capture reads them without
changing them. Reading a job again stores nothing twice; a job that fails
again after a replay is a new letter. Its queue is named by a connection of
the configuration (docs/configuration.md), as its letters carry it:
`)
	var envs []string
	for _, s := range registry.JobStores() {
		w := s.Words()
		what := "      " + w.Captures + " (" + w.Doc + ")"
		if len(what) > 80 {
			what = "      " + w.Captures + "\n      (" + w.Doc + ")"
		}
		fmt.Fprintf(&b, "  %s\n%s\n", w.QueueForm, what)
		for _, env := range []string{w.UserEnv, w.PasswordEnv} {
			if env != "" {
				envs = append(envs, env)
			}
		}
	}
	b.WriteString("or by a URL:\n")
	for _, s := range registry.JobStores() {
		fmt.Fprintf(&b, "  %s\n", s.Words().URLForm)
	}
	b.WriteString("A URL goes through the configuration's connection to the same host, port and\n" +
		"database, as that connection's login. Without one, the URL's login and the\n" +
		"environment (" + strings.Join(envs, ", ") + ") reach the store, and\n" +
		"the letters name a connection derived from the server, which stderr gives: a\n" +
		"replay of them needs it in the configuration.")
	return linewrap.Words(b.String(), 80)
}

// jobStorePrefixes lists the job stores' queue prefixes for a flag's
// usage, each followed by "…", as the registry lists them.
func jobStorePrefixes() string {
	var forms []string
	for _, s := range registry.JobStores() {
		forms = append(forms, s.Traits().QueuePrefix+"…")
	}
	if len(forms) < 2 {
		return strings.Join(forms, "")
	}
	return strings.Join(forms[:len(forms)-1], ", ") + " or " + forms[len(forms)-1]
}
