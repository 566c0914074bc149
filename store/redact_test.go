package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
		{"multi-host", "postgres://u:S3cretPW@127.0.0.1:1,127.0.0.2:2/db", []string{"S3cretPW"}, "cannot reach PostgreSQL at 127.0.0.1:1/db: "},
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
			for _, text := range []string{err.Error(), goSyntax(err)} {
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

// recognisable returns what a reader would recognise as password: as typed,
// percent-decoded and -encoded, as %q and %+q write it, and, when it was typed
// raw into a URL, the runs before and after each "@", "/", "?" and "#", which
// pgx prints as a host, port or database when it ends the password there.
// Forms shorter than four bytes are left out: they cannot be told from the
// rest of a message.
func recognisable(password string, raw bool) []string {
	plain := []string{password, url.PathEscape(password), url.QueryEscape(password)}
	if dec, err := url.PathUnescape(password); err == nil {
		plain = append(plain, dec)
	}
	for i := 0; raw && i < len(password); i++ {
		if strings.IndexByte("@/?#", password[i]) >= 0 {
			plain = append(plain, password[:i], password[i+1:])
		}
	}
	var out []string
	for _, s := range plain {
		if len(s) >= 4 {
			q, a := strconv.Quote(s), strconv.QuoteToASCII(s)
			out = append(out, s, q[1:len(q)-1], a[1:len(a)-1])
		}
	}
	return out
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
			for _, text := range []string{err.Error(), goSyntax(err)} {
				for _, form := range recognisable(pw, shape.raw) {
					if showsOutsideMasks(text, form) && !strings.Contains(fixed, form) {
						t.Errorf("store.Open(%q) shows %q:\n%s", raw, form, text)
					}
				}
			}
		}
	})
}

// goSyntax returns err as %#v prints it, without the pointer values, whose
// hex digits may spell a piece of any password.
func goSyntax(err error) string {
	return pointer.ReplaceAllString(fmt.Sprintf("%#v", err), "0x…")
}

var pointer = regexp.MustCompile(`0x[0-9a-f]+`)

// showsOutsideMasks reports whether form appears in text where no "xxxxx"
// touches it, nor the ":" that pgx writes before its own mask: a password
// "xxxx" is no leak.
func showsOutsideMasks(text, form string) bool {
	for _, seg := range strings.Split(strings.ReplaceAll(text, ":xxxxx", "xxxxx"), "xxxxx") {
		if strings.Contains(seg, form) {
			return true
		}
	}
	return false
}
