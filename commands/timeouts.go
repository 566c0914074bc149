package commands

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/store"
)

// durationSetting is a duration flag that knows whether it was given, so
// that an unset flag falls back to the environment and then the default.
type durationSetting struct {
	value time.Duration
	set   bool
}

var _ pflag.Value = (*durationSetting)(nil)

func (d *durationSetting) String() string {
	if !d.set {
		return ""
	}
	return d.value.String()
}

func (d *durationSetting) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	d.value, d.set = v, true
	return nil
}

func (d *durationSetting) Type() string { return "duration" }

// resolve returns the flag's value, else the environment's, else def.
func (d *durationSetting) resolve(getenv func(string) string, flag, env string, def time.Duration) (time.Duration, error) {
	if d.set {
		return d.value, nil
	}
	s := getenv(env)
	if s == "" {
		return def, nil
	}
	var fromEnv durationSetting
	if err := fromEnv.Set(s); err != nil {
		return 0, flagErrorf("%s=%q is not a duration for --%s (such as 30s or 2m): %v", env, s, flag, err)
	}
	return fromEnv.value, nil
}

// DBTimeout resolves --db-timeout, then EXPIRYCTL_DB_TIMEOUT, then
// store.DefaultTimeout; 0 turns the timeouts off.
func (f *Factory) DBTimeout() (time.Duration, error) {
	return f.DBTimeoutFlag.resolve(f.Getenv, "db-timeout", "EXPIRYCTL_DB_TIMEOUT", store.DefaultTimeout)
}

// AMQPHeartbeat resolves --amqp-heartbeat, then EXPIRYCTL_AMQP_HEARTBEAT,
// then broker.DefaultHeartbeat.
func (f *Factory) AMQPHeartbeat() (time.Duration, error) {
	hb, err := f.AMQPHeartbeatFlag.resolve(f.Getenv, "amqp-heartbeat", "EXPIRYCTL_AMQP_HEARTBEAT", broker.DefaultHeartbeat)
	if err == nil && hb < time.Second {
		// AMQP negotiates whole seconds; below one, amqp091 would turn
		// heartbeats off, and with them the only way to notice a silent
		// broker.
		return 0, flagErrorf("--amqp-heartbeat %s: the heartbeat is in whole seconds, at least 1s", hb)
	}
	return hb, err
}

// storeOptions are the PostgreSQL options of the settings; serverTimeouts
// is false for migrate (see store.Options).
func (f *Factory) storeOptions(serverTimeouts bool) (store.Options, error) {
	timeout, err := f.DBTimeout()
	if err != nil {
		return store.Options{}, err
	}
	return store.Options{Timeout: timeout, ServerTimeouts: serverTimeouts}, nil
}

// dialOptions are the RabbitMQ options of the settings.
func (f *Factory) dialOptions(properties map[string]any) (broker.DialOptions, error) {
	hb, err := f.AMQPHeartbeat()
	if err != nil {
		return broker.DialOptions{}, err
	}
	return broker.DialOptions{Heartbeat: hb, Properties: properties}, nil
}

// timeoutFlags registers --db-timeout and --amqp-heartbeat on flags.
func (f *Factory) timeoutFlags(flags *pflag.FlagSet) {
	flags.Var(&f.DBTimeoutFlag, "db-timeout",
		fmt.Sprintf("how long PostgreSQL may take to answer: a statement's statement_timeout and lock_timeout, and the silence after which a connection waiting for a reply is given up as dead (env EXPIRYCTL_DB_TIMEOUT; default %s; 0 turns them off)", store.DefaultTimeout))
	flags.Var(&f.AMQPHeartbeatFlag, "amqp-heartbeat",
		fmt.Sprintf("AMQP heartbeat interval: RabbitMQ is given up as dead after one and a half intervals without a frame (env EXPIRYCTL_AMQP_HEARTBEAT; default %s; whole seconds)", broker.DefaultHeartbeat))
}
