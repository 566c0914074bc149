package commands

import (
	"fmt"
	"strings"

	"github.com/expiryctl/expiryctl/dsn"
)

// warnPasswordsInArgs warns, once per command, about each URL flag that
// carries a password: a process's arguments are readable by every local
// user (ps, /proc/PID/cmdline) for as long as it runs, which a
// `dlq ingest --follow` does for weeks. The value is never echoed.
func (f *Factory) warnPasswordsInArgs() {
	for _, flag := range []struct{ name, value, instead string }{
		{"--database-url", f.DatabaseURLFlag, "EXPIRYCTL_DATABASE_URL, a password file (~/.pgpass, or PGPASSFILE) or a service file (PGSERVICEFILE, with `service=NAME` in the URL)"},
		{"--amqp-url", f.AMQPURLFlag, "EXPIRYCTL_AMQP_URL"},
		{"--management-url", f.ManagementURLFlag, "EXPIRYCTL_MANAGEMENT_URL"},
	} {
		if !urlsHavePassword(flag.value) {
			continue
		}
		fmt.Fprintf(f.IO.ErrOut, "warning: %s carries a password, which every user of this machine can read in the process list while the command runs: give it in %s instead (see docs/operations.md, \"Passwords\")\n",
			flag.name, flag.instead)
	}
}

// urlsHavePassword reads value as one URL or a comma-separated list of
// them (the RabbitMQ flags' form).
func urlsHavePassword(value string) bool {
	if dsn.HasPassword(value) {
		return true
	}
	for _, u := range strings.Split(value, ",") {
		if dsn.HasPassword(strings.TrimSpace(u)) {
			return true
		}
	}
	return false
}
