package commands

import (
	"errors"
	"testing"
)

// A lost PostgreSQL's reason stays on the outage's one line: for a
// multi-host URL pgx puts one reason per host on indented lines after a
// first line that ends in ":", and cutting at the first newline left
// nothing after the colon.
func TestErrorLineKeepsEachHostsReason(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, err, want string }{
		{"one line", "FATAL: terminating connection due to administrator command (SQLSTATE 57P01)",
			"FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"},
		{"advice dropped", "cannot reach PostgreSQL at 127.0.0.1:1/db: connection refused\ncheck the host and port",
			"cannot reach PostgreSQL at 127.0.0.1:1/db: connection refused"},
		{"every host's reason", "failed to connect to `user=u database=db`:\n\t127.0.0.1:5432 (127.0.0.1): dial error: connection refused\n\t127.0.0.1:5433 (127.0.0.1): server is read-only",
			"failed to connect to `user=u database=db`: 127.0.0.1:5432 (127.0.0.1): dial error: connection refused; 127.0.0.1:5433 (127.0.0.1): server is read-only"},
	}
	for _, c := range cases {
		if got := errorLine(errors.New(c.err)); got != c.want {
			t.Errorf("%s: errorLine\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
