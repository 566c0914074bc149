package e2e_test

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestMalformedURLsAreUsageErrors: a URL that does not parse, or names a
// scheme its server does not speak, is the user's argument that is wrong:
// it exits 2 as docs/exit-codes.md says, and says what a right one looks
// like, never the password.
func TestMalformedURLsAreUsageErrors(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := newCLI(db.URL, "e2e-bad-urls")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--database-url", "postgres//alice@127.0.0.1:5432/expiryctl", "dlq", "list"},
			"a URL looks like postgres://USER@HOST:5432/DATABASE"},
		{[]string{"--amqp-url", "http://guest:S3cretPW@127.0.0.1:5672/", "dlq", "ingest", "--queue", "nowhere.dlq"},
			"a URL looks like amqp://USER@HOST:5672/VHOST"},
	} {
		r := c.exits(t, 2, tc.args...)
		if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "S3cretPW") {
			t.Errorf("want it to say %q, and no password: %s", tc.want, r)
		}
	}
}
