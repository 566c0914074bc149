package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/replay"
)

// configured is a Factory reading the configuration text, and env as
// its environment.
func configured(t *testing.T, text string, env map[string]string) *Factory {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory(t)
	f.ConfigFlag = path
	f.Getenv = func(k string) string { return env[k] }
	return f
}

const twoContexts = `current-context: prod
contexts:
  prod:
    archive:
      url: postgres://alice@db.prod:5432/expiryctl
      password-env: ALICE_PG
    outcomes:
      url: postgres://reader@db.prod:5432/reservations
    connections:
      mq:
        system: rabbitmq
        url: amqp://alice@mq.prod:5672/
        password-env: MQ_PASSWORD
        management-url: http://mq.prod:15672/
  staging:
    connections:
      river:
        system: river
        url: postgres://river_reader@db.staging:5432/river
`

// TestConnectionsTakeFlagsThenEnvironmentThenConfiguration holds the order
// of each setting: a flag over the environment over the context over the
// default, the context picked by --context, then EXPIRYCTL_CONTEXT, then
// the file; and a password from a secret reaches the URL dialled, never
// the file.
func TestConnectionsTakeFlagsThenEnvironmentThenConfiguration(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ALICE_PG": "pg-secret", "MQ_PASSWORD": "mq-secret"}
	f := configured(t, twoContexts, env)
	if got := f.DatabaseURL(); got != "postgres://alice:pg-secret@db.prod:5432/expiryctl" {
		t.Errorf("the archive from the context: %s", got)
	}
	if got := f.OutcomeURL(); got != "postgres://reader@db.prod:5432/reservations" {
		t.Errorf("the reservation database from the context: %s", got)
	}
	if got := f.AMQPURLs(); len(got) != 1 || got[0] != "amqp://alice:mq-secret@mq.prod:5672/" {
		t.Errorf("RabbitMQ from the context: %v", got)
	}
	if got := f.ManagementURLs(); len(got) != 1 || got[0] != "http://mq.prod:15672/" {
		t.Errorf("the management API from the context: %v", got)
	}
	c, err := f.RabbitMQConnection()
	if err != nil || c.Name != "mq" {
		t.Errorf("the RabbitMQ connection letters name: %q, %v", c.Name, err)
	}

	env["EXPIRYCTL_DATABASE_URL"] = "postgres://bob@db.env/expiryctl"
	env["EXPIRYCTL_AMQP_URL"] = "amqp://bob@mq.env:5672/"
	if got := f.DatabaseURL(); got != "postgres://bob@db.env/expiryctl" {
		t.Errorf("the environment over the context: %s", got)
	}
	if got := f.AMQPURLs(); got[0] != "amqp://bob@mq.env:5672/" {
		t.Errorf("the environment over the context: %v", got)
	}
	f.DatabaseURLFlag, f.AMQPURLFlag = "postgres://carol@db.flag/expiryctl", "amqp://carol@mq.flag:5672/"
	if got := f.DatabaseURL(); got != f.DatabaseURLFlag {
		t.Errorf("the flag over the environment: %s", got)
	}
	if got := f.AMQPURLs(); got[0] != f.AMQPURLFlag {
		t.Errorf("the flag over the environment: %v", got)
	}

	other := configured(t, twoContexts, map[string]string{config.EnvContext: "staging"})
	if got := other.DatabaseURL(); got != "postgres://root@127.0.0.1:5432/expiryctl?sslmode=disable" && !strings.HasPrefix(got, "postgres://root@") {
		t.Errorf("a context with no archive takes the default: %s", got)
	}
	if _, _, err := other.connectionNamed(deadletter.System("river"), "river"); err != nil {
		t.Errorf("EXPIRYCTL_CONTEXT picks staging, whose river connection: %v", err)
	}
	other.ContextFlag = "prod"
	if _, _, err := other.connectionNamed(deadletter.System("river"), "river"); err == nil {
		t.Error("--context prod over EXPIRYCTL_CONTEXT staging still found staging's connection")
	}
	other.ContextFlag = "prdo"
	if _, err := other.Context(); err == nil || !strings.Contains(err.Error(), `did you mean "prod"`) {
		t.Errorf("a mistyped context: %v", err)
	}
}

// TestConnectionNamedRefusesWhatTheContextDoesNotDefine: a name the context
// does not define, or defines for another system, is refused with the
// rule connection-unknown's error before anything connects, and a secret
// that is named but unset names the connection and the variable.
func TestConnectionNamedRefusesWhatTheContextDoesNotDefine(t *testing.T) {
	t.Parallel()
	f := configured(t, twoContexts, map[string]string{config.EnvContext: "prod"})
	_, _, err := f.connectionNamed(deadletter.System("bullmq"), "evil")
	var refusal *replay.Refusal
	if !errors.As(err, &refusal) || refusal.Rule != "connection-unknown" || !strings.Contains(err.Error(), `connection "evil"`) ||
		!strings.Contains(err.Error(), "nothing was dialled") {
		t.Errorf("an unknown connection: %v", err)
	}
	if _, _, err := f.connectionNamed(deadletter.System("bullmq"), "mq"); !errors.As(err, &refusal) || refusal.Rule != "connection-unknown" ||
		!strings.Contains(err.Error(), "is a rabbitmq connection") {
		t.Errorf("a RabbitMQ connection named as BullMQ's: %v", err)
	}
	if _, err := f.RabbitMQConnection(); err == nil || !strings.Contains(err.Error(), "$MQ_PASSWORD") {
		t.Errorf("a password source that is not set: %v", err)
	}
	if _, err := f.AMQP(); err == nil || f.amqpDialled {
		t.Errorf("AMQP with a secret that cannot be read dialled (%v)", err)
	}
}

// TestPublishThroughRefusesAnotherConnectionsLetters: a run of a request
// whose letters came from connection "mq-eu" is refused, before anything
// is dialled, by a context whose RabbitMQ connection is another.
func TestPublishThroughRefusesAnotherConnectionsLetters(t *testing.T) {
	t.Parallel()
	f := configured(t, twoContexts, map[string]string{config.EnvContext: "prod", "MQ_PASSWORD": "x"})
	r := &requestRunner{&services{publishConnection: f.publishConnection}}
	req := replay.Request{ID: 7, Targets: []replay.Target{{Exchange: "", RoutingKey: "reservation-expiry", Connection: "mq-eu"}}}
	_, err := r.publishThrough(req)
	var refusal *replay.Refusal
	if !errors.As(err, &refusal) || refusal.Rule != "connection-unknown" || !strings.Contains(err.Error(), `"mq-eu"`) {
		t.Errorf("a run of mq-eu's letters through mq: %v", err)
	}
	req.Targets[0].Connection = "mq"
	if name, err := r.publishThrough(req); err != nil || name != "mq" {
		t.Errorf("a run of mq's letters: %q, %v", name, err)
	}
	// A request made before letters named connections names none: the
	// one called rabbitmq, which this context's is not.
	req.Targets[0].Connection = ""
	if _, err := r.publishThrough(req); err == nil {
		t.Error("a request of the letters of before ran through a connection not called rabbitmq")
	}
}

// TestNoConnectionLogsInAsTheOperatingSystemsUser: an archive's or a
// reservation database's URL that names no login is refused, unless
// PGUSER names one.
func TestNoConnectionLogsInAsTheOperatingSystemsUser(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw  string
		env  map[string]string
		want bool
	}{
		{"postgres://alice@db/x", nil, true},
		{"postgres://db/x?user=alice", nil, true},
		{"host=db dbname=x user=alice", nil, true},
		{"postgres://db/x", nil, false},
		{"postgres:///x", nil, false},
		{"host=/var/run/postgresql dbname=x", nil, false},
		{"postgres://db/x", map[string]string{"PGUSER": "alice"}, true},
	} {
		if got := explicitLogin(c.raw, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("explicitLogin(%q, %v) = %v, want %v", c.raw, c.env, got, c.want)
		}
	}
	f, _, _ := testFactory(t)
	f.DatabaseURLFlag = "postgres://127.0.0.1:1/expiryctl"
	if _, err := f.RawDB(context.Background()); err == nil || !strings.Contains(err.Error(), "never logs in as the operating system's user") {
		t.Errorf("an archive URL with no login: %v", err)
	}
}

// TestTypedQueueResolvesThroughTheConfiguration: a job store's queue typed
// on the command line by a configured connection's name is that
// connection's, with what its query says of a capture (River's states);
// a name the configuration does not define is refused as a letter's
// would be, not read as a server's URL.
func TestTypedQueueResolvesThroughTheConfiguration(t *testing.T) {
	t.Parallel()
	f := configured(t, twoContexts, map[string]string{config.EnvContext: "staging"})
	river, _ := jobStoreFor(deadletter.System("river"))
	name, err := f.typedQueue(river, "river://river/expiry?states=discarded,cancelled")
	if err != nil || name != "river://river/expiry" {
		t.Fatalf("a configured River queue with states: %q, %v", name, err)
	}
	ref, err := f.jobRef(river, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := ref.(interface{ Server() string }).Server(); got != "db.staging:5432/river" {
		t.Errorf("the queue reaches %s, want the connection's server", got)
	}
	if states := fmt.Sprint(ref.(riverjobs.Ref).States); states != "[cancelled discarded]" {
		t.Errorf("the capture reads states %s, want those the name asked for", states)
	}
	var refusal *replay.Refusal
	for _, typed := range []string{"river://nosuch/expiry", "jobtable://nosuch/public.jobs"} {
		s, _ := f.jobStoreOf(typed)
		if _, err := f.typedQueue(s, typed); !errors.As(err, &refusal) || refusal.Rule != "connection-unknown" {
			t.Errorf("%s: %v, want refused by connection-unknown", typed, err)
		}
	}
}
