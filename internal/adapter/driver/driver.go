// Package driver is the seam between expiryctl's core and the queue
// systems, in the manner of river's riverdriver: each system is one
// driver, in a package of its own under internal/adapter, and everything
// that differs between systems is the driver's. The core (replay,
// deadletter, commands, the TUI, the views) reaches a system only
// through these interfaces, given it by the registry
// (internal/adapter/registry), and names none.
//
// A Driver says what the core may know of its system without connecting
// (Traits), how people are told about it (Words), and what its
// connections take in the operator's configuration (config.Rules). A
// JobStore is a driver whose failed jobs stay in their store, captured
// read-only and retried where they are; it names its queues, resolves a
// connection's name to a reference with credentials, opens a capture, a
// retrier and a live view, and tells its server's outages from refusals.
//
// drivertest is the suite every driver passes.
package driver

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// Driver is one queue system.
type Driver interface {
	// Traits is what the core may know of the system without asking it.
	Traits() Traits
	// Words is how people are told about the system.
	Words() Words
	// Config is what a connection of the system takes in the operator's
	// configuration file.
	Config() config.Rules
	// Unreachable tells a server that does not answer (to be waited for
	// by a followed capture) from a refusal.
	Unreachable(err error) bool
}

// Evidence is what a system shows of who consumes a queue, which the
// handler check reads before a replay.
type Evidence int

const (
	// NoConsumers is a system that shows nobody consuming (a job store
	// whose workers leave no trace): a request must vouch for the handler
	// (--same-handler-ok), which is known when it is made.
	NoConsumers Evidence = iota
	// Consumers is a system that counts its consumers, without their
	// versions.
	Consumers
	// VersionedConsumers is a system each of whose consumers says which
	// handler it runs.
	VersionedConsumers
)

// Traits is what the core may know of a system without connecting to it.
type Traits struct {
	// System is the name letters carry (dead_letters.source_system).
	System deadletter.System
	// QueuePrefix begins every queue name of the system as letters carry
	// it ("river://"); empty for a system whose queues are named plainly.
	QueuePrefix string
	// RetriesInPlace: a replay retries the job where it is rather than
	// sending a copy.
	RetriesInPlace bool
	// NamesConnectionInQueue: a queue's name is QueuePrefix, the
	// connection's name, "/" and the queue there.
	NamesConnectionInQueue bool
	// DefaultConnection is the connection's name of letters captured
	// before letters named one; empty when the queue's name holds it.
	DefaultConnection string
	// Evidence is what the system shows of a queue's consumers.
	Evidence Evidence
	// Rates: the system's live view measures a queue's traffic (publish,
	// delivery and acknowledgement rates), which a replay's plan reads.
	Rates bool
	// Routes: a message goes through a route (an exchange) to the queues
	// bound there. Its letters keep their wire properties and the
	// broker's own records of their deaths, and a replay may name the
	// route (replay.Routes).
	Routes bool
}

// Words is how people are told about a system: in help, refusals and
// advice.
type Words struct {
	// Title is the system's name in a sentence ("River").
	Title string
	// Server is what an outage lost ("River's database"), and
	// ServerLabel how metrics label it ("river").
	Server, ServerLabel string
	// Doc is the page that documents the system ("docs/river.md").
	Doc string
	// QueueForm is a queue's name as letters carry it
	// ("river://CONNECTION/QUEUE"), URLForm a job store's queue typed as
	// a URL, and Captures what a capture of such a queue reads, for help.
	QueueForm, URLForm, Captures string
	// ConsumersUnseen says why, of a system that shows nobody consuming a
	// queue or not which handler version each consumer runs, the handler
	// check cannot be verified, so that a request must vouch for the
	// handler when it is made (rule handler-unseen); empty for a system
	// whose consumers say their versions.
	ConsumersUnseen string
	// Replay is what `replay request --help` says of where the system's
	// letters go and the flags that choose it, when there is more to say
	// than that they go back where they failed; empty otherwise.
	Replay string
	// NoOrigin says what a replay of a letter that names no queue it came
	// from needs, for a system without routes; empty for another.
	NoOrigin string
	// Implicit says where a connection of the system comes from when the
	// context defines none; empty when it must define one.
	Implicit string
	// PasswordEnv and UserEnv name the environment variables that give a
	// URL typed on the command line its password and, when it names
	// none, its login; empty when the system takes neither.
	PasswordEnv, UserEnv string
}

// Ref is one queue on one connection, with the credentials to reach it.
type Ref interface {
	// Name is the queue's name as letters carry it, which names the
	// connection and never a server.
	Name() string
	// Server is where it reaches, for people: HOST:PORT and what there.
	Server() string
}

// Source is a capture of a queue's dead letters.
type Source interface {
	deadletter.Source
	Close() error
	// QueueName is the queue's name as letters carry it.
	QueueName() string
}

// Env is what a driver may ask of the command's world.
type Env struct {
	// Getenv reads the environment (a typed URL's login).
	Getenv func(string) string
	// Approved reads the settings a second person approved for the
	// system's queues, by queue name (the policy's job_tables), for a
	// system that reads its store only through them.
	Approved func(context.Context) (map[string]json.RawMessage, error)
}

// Broker is a driver whose dead letters are copies in a queue: capture
// receives them and deletes each once stored, and a replay sends copies
// (Encoder). Its queues are named by what the system calls them, and one
// connection of the context reaches them all. RabbitMQ's connections
// (a cluster's nodes, its management API) are still the commands' own.
type Broker interface {
	Driver
	// IsRef says whether s has the form of the system's queue names or
	// URLs; CheckRef says what is wrong with one that has.
	IsRef(s string) bool
	CheckRef(s string) error
	// OpenSource opens the capture of queue through connection c, holding
	// at most prefetch not yet stored.
	OpenSource(ctx context.Context, c config.Connection, queue string, prefetch int) (Source, error)
	// OpenPublisher opens what a run sends its copies with through c.
	OpenPublisher(c config.Connection) (replay.Broker, error)
	// Topology reads what queue and its dead-letter queue hold now
	// through c.
	Topology(ctx context.Context, c config.Connection, queue string) (deadletter.QueueReport, error)
	// FromEnvironment is the connection the environment in use stands
	// for, named Traits.DefaultConnection (what `config init` writes); ok
	// is false when the environment names none.
	FromEnvironment(getenv func(string) string) (c config.Connection, ok bool)
}

// JobStore is a driver whose failed jobs stay in their store: captured
// read-only, retried in place.
type JobStore interface {
	Driver
	// IsRef says whether s has the form of the system's queue names or
	// URLs.
	IsRef(s string) bool
	// ParseURL reads a URL typed on the command line into the reference
	// it reaches, named by config.DeriveName, and the queue's part of it
	// that RefFor takes.
	ParseURL(arg string, env Env) (ref Ref, queue string, err error)
	// SplitName reads a queue's name as letters carry it into the
	// connection's name and the queue's part.
	SplitName(name string) (conn, queue string, err error)
	// RefFor is queue on the configured connection c, logged in with
	// password.
	RefFor(c config.Connection, password, queue string) (Ref, error)
	// OpenSource opens the capture of ref's failed jobs, holding at most
	// prefetch not yet acknowledged.
	OpenSource(ctx context.Context, ref Ref, env Env, prefetch int) (Source, error)
	// OpenRetrier opens the retrier of ref's connection; resolve finds
	// the reference of each queue a run's message names.
	OpenRetrier(ctx context.Context, ref Ref, env Env, resolve func(name string) (Ref, error)) (replay.Broker, error)
	// OneRetrier says a single retrier reaches every connection (it
	// resolves each message's queue itself).
	OneRetrier() bool
	// Consumers reads who works a run's targets, resolving each target's
	// queue with resolve; nil for a store whose workers leave no trace
	// (Words.ConsumersUnseen says why).
	Consumers(resolve func(name string) (Ref, error)) replay.Consumers
	// Topology reads what ref's queue holds now, by state.
	Topology(ctx context.Context, ref Ref, env Env) (deadletter.QueueReport, error)
	// ServerError says the server did not answer or refused the login:
	// unavailable to the command (exit 5).
	ServerError(err error) bool
}

// WithLogin puts the login of the environment variable userEnv into ref
// when ref names none: a URL typed on the command line may leave its
// login to the environment, never to the operating system's user.
func WithLogin(getenv func(string) string, ref, userEnv string) string {
	if getenv == nil || userEnv == "" {
		return ref
	}
	user := getenv(userEnv)
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || user == "" || strings.Contains(strings.SplitN(rest, "/", 2)[0], "@") {
		return ref
	}
	return scheme + "://" + url.User(user).String() + "@" + rest
}
