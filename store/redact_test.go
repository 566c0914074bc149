package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/internal/fixture/secrettest"
	"github.com/expiryctl/expiryctl/store"
)

// TestOpenRedactsPassword opens URLs whose passwords pgx or net/url misread
// and checks that neither the error's message nor its %#v shows any of the
// password. Nothing listens on 127.0.0.1:1, so nothing real is needed.
func TestOpenRedactsPassword(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url string
		hidden    []string
		want      string
	}{
		{"space", "postgres://u:S3cret PW@127.0.0.1:1/db",
			[]string{"S3cret PW", "S3cret"}, "invalid database URL postgres://u:xxxxx@127.0.0.1:1/db: "},
		// pgx ends the userinfo at the first "@" and takes the rest of the
		// password for the host.
		{"raw @", "postgres://u:pa@ssS3cretPW5@127.0.0.1:1/db",
			[]string{"pa@ssS3cretPW5", "ssS3cretPW5"}, "cannot reach PostgreSQL at xxxxx@127.0.0.1:1/db: "},
		{"raw @, short rest", "postgres://u:pa@ss@127.0.0.1:1/db",
			[]string{"pa@ss", "ss@"}, "cannot reach PostgreSQL at xxxxx@127.0.0.1:1/db: "},
		{"raw @, multi-host", "postgres://u:pa@ssS3cretPW5@127.0.0.1:1,127.0.0.2:2/db",
			[]string{"pa@ssS3cretPW5", "ssS3cretPW5"}, "cannot reach PostgreSQL at "},
		// With a "/" before any "@" pgx reads no userinfo: the user is the
		// host, the password's head the port and its tail the database.
		{"raw /", "postgres://localhost:12/S3cretPW@127.0.0.1:1/db",
			[]string{"12/S3cretPW", "S3cretPW"}, "cannot reach PostgreSQL at localhost:xxxxx@127.0.0.1:1/db: "},
		{"raw / not a port", "postgresql://u:S3cret/PW@127.0.0.1:1/db",
			[]string{"S3cret/PW", "S3cret"}, "invalid database URL postgresql://u:xxxxx@127.0.0.1:1/db: "},
		{"raw #", "postgresql://u:S3cret#PW@127.0.0.1:1/db", []string{"S3cret#PW", "S3cret"}, "cannot reach PostgreSQL at 127.0.0.1:1/db: "},
		{"percent-encoded", "postgres://u:p%40ss%20S3cret@127.0.0.1:1/db", []string{"p%40ss%20S3cret", "p@ss S3cret"}, "cannot reach"},
		{"bad escape", "postgres://u:S3cr%zzetPW@127.0.0.1:1/db", []string{"S3cr%zzetPW"}, "invalid database URL postgres://u:xxxxx@127.0.0.1:1/db: "},
		{"multi-host", "postgres://u:S3cretPW@127.0.0.1:1,127.0.0.2:2/db", []string{"S3cretPW"}, "cannot reach PostgreSQL at 127.0.0.1:1,127.0.0.2:2/db: "},
		{"query", "postgres://127.0.0.1:1/db?sslmode=disable&password=S3cret%20PW", []string{"S3cret%20PW", "S3cret PW"}, "cannot reach"},
		{"query, raw space", "postgres://127.0.0.1:1/db?sslmode=disable&password=S3cret PW",
			[]string{"S3cret PW", "S3cret"}, "invalid database URL postgres://127.0.0.1:1/db?sslmode=disable&password=xxxxx: "},
		{"key/value quoted", "host=127.0.0.1 port=1 user=u password='S3cret PW' dbname=db", []string{"S3cret PW"}, "cannot reach"},
		{"key/value, invalid", "host=127.0.0.1 port=abc password='it\\'s S3cret'",
			[]string{"it's S3cret", "s S3cret", "S3cret"}, "invalid database URL host=127.0.0.1 port=abc password=xxxxx: "},
		{"no scheme", "u:S3cretPW@127.0.0.1:1/db", []string{"S3cretPW"}, "invalid database URL u:xxxxx@127.0.0.1:1/db: "},
		{"an AMQP URL", "amqp://u:pa@ssS3cretPW5@127.0.0.1:1/", []string{"pa@ssS3cretPW5", "ssS3cretPW5"}, "invalid database URL amqp://u:xxxxx@127.0.0.1:1/: "},
		{"user only", "postgres://u@127.0.0.1:1/db", nil, "cannot reach PostgreSQL at 127.0.0.1:1/db: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			pool, err := store.Open(ctx, c.url)
			if err == nil {
				pool.Close()
				t.Fatalf("Open(%q) succeeded", c.url)
			}
			for _, text := range []string{err.Error(), secrettest.GoSyntax(err)} {
				for _, h := range c.hidden {
					if strings.Contains(text, h) {
						t.Errorf("error shows %q:\n%s", h, text)
					}
				}
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not say %q:\n%s", c.want, err)
			}
		})
	}
}

// hermetic reports whether every host pgx would dial for cfg is this
// machine, or a name no resolver accepts, so that fuzzing never reaches the
// network.
func hermetic(cfg *pgxpool.Config) bool {
	hosts := []string{cfg.ConnConfig.Host}
	for _, fb := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if h != "127.0.0.1" && h != "127.0.0.2" && h != "localhost" && !strings.Contains(h, "@") {
			return false
		}
	}
	return true
}

// FuzzOpenRedactsPassword types a fuzzed password into URLs and key/value
// strings and checks that the error store.Open returns, whether pgx failed to
// parse the string or to reach the server it read, shows no recognisable
// form of the password beyond what the message's fixed text says anyway.
func FuzzOpenRedactsPassword(f *testing.F) {
	for _, pw := range []string{"S3cret PW", "pa@ssS3cretPW5", "12/S3cretPW", "S3cret/PW", "S3cret#PW",
		"p%40ss%20w0rd", "S3cr%zzet", `it's "S3cret"`, "pässwörd€", "\xffS3cret", "S3cret,PW:x@y", "%0@0\xb6"} {
		f.Add(pw)
	}
	shapes := []struct {
		build func(pw string) string
		raw   bool // the password is typed as is into a URL
	}{
		{func(pw string) string { return "postgres://u:" + pw + "@127.0.0.1:1/db" }, true},
		// The user is "localhost" so that when pgx reads no userinfo (a "/"
		// before any "@") the host it reads is still this machine.
		{func(pw string) string { return "postgresql://localhost:" + pw + "@127.0.0.1:1,127.0.0.2:2/db" }, true},
		{func(pw string) string { return "postgres://127.0.0.1:1/db?password=" + pw }, true},
		{func(pw string) string { return "postgres://127.0.0.1:1/db?password=" + url.QueryEscape(pw) }, false},
		{func(pw string) string {
			return "host=127.0.0.1 port=1 password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'"
		}, false},
	}
	fixed := (&store.ConnectError{Err: errors.New("")}).Error() + "invalid database URL"
	f.Fuzz(func(t *testing.T, pw string) {
		for i, shape := range shapes {
			// In a query a raw "&" starts another parameter, whatever the
			// user meant.
			if i == 2 && strings.Contains(pw, "&") {
				continue
			}
			raw := shape.build(pw)
			if cfg, err := pgxpool.ParseConfig(raw); err == nil && !hermetic(cfg) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			pool, err := store.Open(ctx, raw)
			cancel()
			if err == nil {
				pool.Close()
				continue
			}
			for _, text := range []string{err.Error(), secrettest.GoSyntax(err)} {
				for _, form := range secrettest.Forms(pw, shape.raw, 4) {
					if secrettest.CountOutsideMasks(text, form) > 0 && !strings.Contains(fixed, form) {
						t.Errorf("store.Open(%q) shows %q:\n%s", raw, form, text)
					}
				}
			}
		}
	})
}
