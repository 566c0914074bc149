package store_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
	"github.com/expiryctl/expiryctl/store"
)

// TestConnectErrorSaysWhatFailed dials the real server wrongly in each way
// a person can, and checks that the message names the failure and a next
// step for it: the development hint to start a local server only where
// nothing answered.
func TestConnectErrorSaysWhatFailed(t *testing.T) {
	t.Parallel()
	admin, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(u *url.URL)) string {
		u := *admin
		edit(&u)
		return u.String()
	}
	cases := []struct {
		name, url  string
		what, next string
	}{
		{"no such database", with(func(u *url.URL) { u.Path = "/expiryctl_no_such_database" }),
			"no such database on PostgreSQL at ", "createdb"},
		{"unknown login", with(func(u *url.URL) { u.User = url.User("expiryctl_nobody") }),
			"PostgreSQL refused the credentials at ", `user "expiryctl_nobody"`},
		// 127.0.0.2 is loopback too, where the local server does not listen.
		{"nothing listens", with(func(u *url.URL) { u.Host = "127.0.0.2:1" }),
			"cannot reach PostgreSQL at 127.0.0.2:1/", "scripts/services.sh"},
		// A mistyped port, while the server runs on its usual one.
		{"the port is mistyped", with(func(u *url.URL) { u.Host = servers.ClosedAddress(t) }),
			"cannot reach PostgreSQL at 127.0.0.1:", "a server answers at 127.0.0.1:5432, PostgreSQL's usual port: check the port"},
		// A primary and its replica, both down: the message names both.
		{"no host of several listens", with(func(u *url.URL) {
			u.Host = "127.0.0.1:1,127.0.0.1:2"
			u.RawQuery = "sslmode=disable&target_session_attrs=read-write"
		}), "cannot reach PostgreSQL at 127.0.0.1:1,127.0.0.1:2/", "scripts/services.sh"},
		{"TLS declined", with(func(u *url.URL) {
			u.Host = refusesTLS(t)
			u.RawQuery = "sslmode=require"
		}), "TLS with PostgreSQL failed at ", "sslmode"},
		{"no such host", with(func(u *url.URL) { u.Host = "expiryctl-no-such-host.invalid:5432" }),
			"cannot reach PostgreSQL at ", "does not resolve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pool, err := store.Open(ctx, c.url)
			if err == nil {
				pool.Close()
				t.Fatal("connected")
			}
			var connErr *store.ConnectError
			if !errors.As(err, &connErr) {
				t.Fatalf("error %T %v, want a *store.ConnectError", err, err)
			}
			msg := err.Error()
			first, next, _ := strings.Cut(msg, "\n")
			if !strings.HasPrefix(first, c.what) || !strings.Contains(next, c.next) {
				t.Errorf("error:\n%s\nwant a first line from %q and a next step naming %q", msg, c.what, c.next)
			}
			if c.next != "scripts/services.sh" && strings.Contains(msg, "services.sh") {
				t.Errorf("a server that answered gets the hint to start one:\n%s", msg)
			}
		})
	}
}

// refusesTLS listens where a PostgreSQL server without TLS would, answering
// every SSLRequest with "N".
func refusesTLS(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				request := make([]byte, 8)
				if _, err := c.Read(request); err == nil {
					_, _ = c.Write([]byte("N"))
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestOpenNamesAURLOfAnotherScheme: a URL of another server's scheme, or
// one that does not parse, is named once, redacted, with why; pgx's own
// copy of it (which reads "//alice@" as a password) is left out.
func TestOpenNamesAURLOfAnotherScheme(t *testing.T) {
	t.Parallel()
	cases := []struct{ url, want string }{
		{"mysql://alice@db.example:3306/reservations",
			"invalid database URL mysql://alice@db.example:3306/reservations: mysql:// is not PostgreSQL's scheme"},
		{"mysql://alice:s3cret@db.example:3306/reservations",
			"invalid database URL mysql://alice:xxxxx@db.example:3306/reservations: mysql:// is not PostgreSQL's scheme"},
		{"postgres//alice@localhost/reservations",
			"invalid database URL postgres//alice@localhost/reservations: failed to parse as keyword/value"},
	}
	for _, c := range cases {
		_, err := store.Open(context.Background(), c.url)
		var invalid *dsn.InvalidError
		if !errors.As(err, &invalid) {
			t.Fatalf("%s: error %T %v, want a *dsn.InvalidError", c.url, err, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, c.want) || strings.Contains(msg, "cannot parse") || strings.Contains(msg, "s3cret") {
			t.Errorf("error:\n%s\nwant it to begin %q, name the URL once and never its password", msg, c.want)
		}
	}
}
