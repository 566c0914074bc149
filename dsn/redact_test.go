package dsn

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"postgres", "postgres://root:s3cret@127.0.0.1:5432/expiryctl", "postgres://root:xxxxx@127.0.0.1:5432/expiryctl"},
		{"postgresql", "postgresql://u:S3cret@h/db?sslmode=require", "postgresql://u:xxxxx@h/db?sslmode=require"},
		{"amqp", "amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:xxxxx@127.0.0.1:5672/"},
		{"amqps", "amqps://u:S3cret@rabbit:5671/vhost", "amqps://u:xxxxx@rabbit:5671/vhost"},
		{"user only", "postgres://root@127.0.0.1/db", "postgres://root@127.0.0.1/db"},
		{"user only amqp", "amqp://guest@rabbit/", "amqp://guest@rabbit/"},
		{"empty password", "postgres://u:@h/db", "postgres://u:@h/db"},
		{"password without user", "postgres://:S3cret@h/db", "postgres://:xxxxx@h/db"},
		{"space", "postgres://u:S3cret PW@host/db", "postgres://u:xxxxx@host/db"},
		{"raw @", "postgres://u:pa@ssS3cretPW5@host/db", "postgres://u:xxxxx@host/db"},
		{"raw @ twice", "amqp://u:a@b@c@rabbit/", "amqp://u:xxxxx@rabbit/"},
		{"raw /", "amqp://u:S3cret/PW@rabbit/", "amqp://u:xxxxx@rabbit/"},
		{"raw / after digits", "amqp://u:12/S3cret@rabbit/", "amqp://u:xxxxx@rabbit/"},
		{"raw #", "postgresql://u:S3cret#PW@h/db", "postgresql://u:xxxxx@h/db"},
		{"raw ?", "postgres://u:S3cret?PW@h/db", "postgres://u:xxxxx@h/db"},
		{"raw @ and /", "postgres://u:a@b/c@host/db", "postgres://u:xxxxx@host/db"},
		{"quote", `amqp://u:S3"cret@rabbit/`, "amqp://u:xxxxx@rabbit/"},
		{"non-ASCII", "postgres://u:pässwörd€@h/db", "postgres://u:xxxxx@h/db"},
		{"percent-encoded", "postgres://u:p%40ss%20w0rd@h/db", "postgres://u:xxxxx@h/db"},
		{"bad escape", "amqp://u:S3cr%zzet@rabbit/", "amqp://u:xxxxx@rabbit/"},
		{"multi-host", "postgres://u:pw@h1:5432,h2:5433/db", "postgres://u:xxxxx@h1:5432,h2:5433/db"},
		{"multi-host raw @ and /", "postgres://u:pa@ss/S3cret@h1:5432,h2:5433/db", "postgres://u:xxxxx@h1:5432,h2:5433/db"},
		{"IPv6", "postgres://u:pw@[::1]:5432/db", "postgres://u:xxxxx@[::1]:5432/db"},
		{"no @, port not a number", "postgres://u:S3cret", "postgres://u:xxxxx"},
		{"no scheme", "u:S3cret@h:5432/db", "u:xxxxx@h:5432/db"},
		{"no scheme, leading //", "//u:S3cret@h/db", "//u:xxxxx@h/db"},
		{"query", "postgres://127.0.0.1/db?password=hunter2&sslmode=disable", "postgres://127.0.0.1/db?password=xxxxx&sslmode=disable"},
		{"query keeps order", "postgres://h/db?sslmode=disable&password=hunter2", "postgres://h/db?sslmode=disable&password=xxxxx"},
		{"query sslpassword", "postgres://u@h/db?sslpassword=S3cret&sslmode=verify-full", "postgres://u@h/db?sslpassword=xxxxx&sslmode=verify-full"},
		{"query encoded key", "postgres://h/db?pass%77ord=S3cret", "postgres://h/db?pass%77ord=xxxxx"},
		{"query space", "postgres://h/db?password=S3cret PW&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"query &", "postgres://h/db?password=pa&ss&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"query #", "postgres://h/db?password=pa#ss", "postgres://h/db?password=xxxxx"},
		{"query raw @", "postgres://h/db?password=pa@ss", "postgres://h/db?password=xxxxx"},
		{"@ in query, no password", "postgres://h/db?application_name=me@work", "postgres://h/db?application_name=me@work"},
		// A raw "@" after the authority may end a password that held a "/", so
		// everything from the first ":" to it is masked too (see Redact).
		{"@ in query after a password", "postgres://u:pw@h/db?application_name=me@work", "postgres://u:xxxxx@work"},
		{"query raw @ after a port", "postgres://h:5432/db?sslmode=disable&password=pa@ss", "postgres://h:xxxxx"},
		{"key/value", "host=127.0.0.1 password=hunter2 user=root", "host=127.0.0.1 password=xxxxx user=root"},
		{"key/value quoted", "host=h user=u password='S3cret PW' dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"key/value escaped quote", `host=h password='it\'s S3cret' user=u`, "host=h password=xxxxx user=u"},
		{"key/value escaped space", `host=h password=S3cret\ PW user=u`, "host=h password=xxxxx user=u"},
		{"key/value spaces around =", "host=h password = S3cret user=u", "host=h password = xxxxx user=u"},
		{"key/value unterminated quote", "host=h password='S3cret PW", "host=h password=xxxxx"},
		{"key/value sslpassword", "host=h sslpassword=S3cret sslkey=/k", "host=h sslpassword=xxxxx sslkey=/k"},
		{"key/value junk before keyword", "host=h oops password=S3cret", "host=h oops password=xxxxx"},
		{"not a URL", "not a url", "not a url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Redact(c.in); got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"two URLs",
			"failed to connect to amqp://bob:pa55word@rabbit:5672/ and postgres://a:b@h/d: refused",
			"failed to connect to amqp://bob:xxxxx@rabbit:5672/ and postgres://a:xxxxx@h/d: refused"},
		{"space, unquoted",
			"invalid database URL postgres://u:S3cret PW@host/db: bad",
			"invalid database URL postgres://u:xxxxx@host/db: bad"},
		{"space, quoted by %q",
			`parse "postgres://u:S3cret PW@host/db": net/url: invalid userinfo`,
			`parse "postgres://u:xxxxx@host/db": net/url: invalid userinfo`},
		{"escaped quote, quoted by %q",
			`parse "amqp://u:S3\"cret@rabbit/": net/url: invalid userinfo`,
			`parse "amqp://u:xxxxx@rabbit/": net/url: invalid userinfo`},
		{"backquotes",
			"cannot parse `postgres://u:S3cret PW@h/db`: bad",
			"cannot parse `postgres://u:xxxxx@h/db`: bad"},
		{"raw @",
			"dial postgres://u:pa@ssS3cret@h/db failed",
			"dial postgres://u:xxxxx@h/db failed"},
		{"raw /",
			"dial amqps://u:S3cret/PW@rabbit/ failed",
			"dial amqps://u:xxxxx@rabbit/ failed"},
		{"query",
			"dial postgres://h/db?sslmode=disable&password=S3cret now",
			"dial postgres://h/db?sslmode=disable&password=xxxxx now"},
		{"key/value quoted",
			"cannot parse `host=h password='S3cret PW' user=u`: bad",
			"cannot parse `host=h password=xxxxx user=u`: bad"},
		{"already masked by pgx",
			"cannot parse `host=h password=xxxxx`: bad",
			"cannot parse `host=h password=xxxxx`: bad"},
		{"environment",
			"PGPASSWORD=S3cret psql failed",
			"PGPASSWORD=xxxxx psql failed"},
		{"no password",
			"dial tcp 127.0.0.1:5432: connect: connection refused",
			"dial tcp 127.0.0.1:5432: connect: connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := RedactText(c.in); got != c.want {
				t.Errorf("RedactText(%q)\n = %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestAddress(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"amqp://guest:guest@127.0.0.1:5672/", "127.0.0.1:5672"},
		{"amqp://u:pa@ss@rabbit:5672/", "rabbit:5672"},
		{"amqps://u:S3cret/PW@rabbit:5671/", "rabbit:5671"},
		{"postgres://u:pw@h1:5432,h2:5433/db", "h1:5432,h2:5433"},
		{"u:S3cret@h:5432/db", "h:5432"},
		{"postgres://u:S3cret", "u:xxxxx"},
		{"host=h password=S3cret", "host=h password=xxxxx"},
		{"postgres://h/db?password=pa@ss", "h"},
		// Read with the userinfo ending at that "@", the port begins a
		// password, so it is scrubbed.
		{"postgres://h:5432/db?sslmode=disable&password=pa@ss", "h:xxxxx"},
	}
	for _, c := range cases {
		if got := Address(c.in); got != c.want {
			t.Errorf("Address(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     []string // among the secrets
		not      []string // not among them
	}{
		{"plain", "postgres://u:S3cret@h/db", []string{"S3cret"}, []string{"u", "h"}},
		{"percent-encoded", "postgres://u:p%40ss%20w0rd@h/db",
			[]string{"p%40ss%20w0rd", "p@ss w0rd", "p@ss%20w0rd", "p%40ss+w0rd"}, nil},
		{"raw @: the host pgx reads", "postgres://u:pa@ssS3cretPW5@h/db",
			[]string{"pa@ssS3cretPW5", "ssS3cretPW5", "pa%40ssS3cretPW5"}, nil},
		{"raw @: a short host keeps its @", "postgres://u:pa@ss@h/db", []string{"pa@ss", "ss@"}, []string{"ss", "pa"}},
		{"raw /: the port net/url reads", "amqps://u:pa/S3cret@h/", []string{"pa/S3cret", "S3cret", ":pa", "pa%2FS3cret"}, []string{"pa"}},
		{"raw #", "postgresql://u:S3cret#PW@h/db", []string{"S3cret#PW", "S3cret", "PW@"}, nil},
		{"space", "postgres://u:S3cret PW@h/db", []string{"S3cret PW", "S3cret%20PW", "S3cret+PW", "S3cret", "PW@"}, nil},
		{"%q forms", `amqp://u:S3"cret€@h/`, []string{`S3"cret€`, `S3\"cret€`, `S3\"cret\u20ac`}, nil},
		{"invalid UTF-8", "amqp://u:S3cret\xff@h/", []string{"S3cret\xff", `S3cret\xff`, "S3cret%FF"}, nil},
		{"query", "postgres://h/db?password=S3cret%20PW", []string{"S3cret%20PW", "S3cret PW"}, nil},
		{"no scheme", "u:S3cret@h/db", []string{"S3cret"}, nil},
		{"multi-host", "postgres://u:S3cret@h1:1,h2:2/db", []string{"S3cret"}, []string{"h1", "h2"}},
		{"key/value", `host=h password='it\'s S3cret' user=u`, []string{"it's S3cret", `it\'s S3cret`, "it%27s%20S3cret"}, []string{"h", "u"}},
		{"short", "postgres://u:pw@h/db", nil, []string{"pw"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := Secrets(c.in)
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("Secrets(%q) lacks %q; got %q", c.in, w, got)
				}
			}
			for _, n := range c.not {
				if slices.Contains(got, n) {
					t.Errorf("Secrets(%q) holds %q", c.in, n)
				}
			}
			for i := 1; i < len(got); i++ {
				if len(got[i]) > len(got[i-1]) {
					t.Errorf("Secrets(%q) not longest first: %q", c.in, got)
					break
				}
			}
		})
	}
	for _, none := range []string{"postgres://u@h/db", "amqp://h/", "host=h user=u", "not a url", ""} {
		if got := Secrets(none); len(got) != 0 {
			t.Errorf("Secrets(%q) = %q, want none", none, got)
		}
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"every occurrence", "a S3cret b S3cret", []string{"S3cret"}, "a xxxxx b xxxxx"},
		{"overlapping, as one", "xabcdefx", []string{"abcd", "cdef"}, "xxxxxxx"},
		{"touching, as one", "[abcdefgh]", []string{"abcd", "efgh"}, "[xxxxx]"},
		{"repeating", "aaaaa", []string{"aaa"}, "xxxxx"},
		{"empty ignored", "text", []string{""}, "text"},
		{"context @ kept", "lookup ss@127.0.0.1: no such host", []string{"ss@"}, "lookup xxxxx@127.0.0.1: no such host"},
		{"context : kept", `invalid port ":pa" after host`, []string{":pa"}, `invalid port ":xxxxx" after host`},
	}
	for _, c := range cases {
		if got := Scrub(c.in, c.secrets...); got != c.want {
			t.Errorf("%s: Scrub(%q, %q) = %q, want %q", c.name, c.in, c.secrets, got, c.want)
		}
	}
}

// TestRedactTextFor covers messages that quote a piece of a URL, which only
// a caller knowing the URL can scrub.
func TestRedactTextFor(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, url, text, want string }{
		{"host pgx misread from a raw @",
			"postgres://u:pa@ssS3cretPW5@127.0.0.1:1/db",
			"cannot reach PostgreSQL at ssS3cretPW5@127.0.0.1:1/db: lookup ssS3cretPW5@127.0.0.1: no such host",
			"cannot reach PostgreSQL at xxxxx@127.0.0.1:1/db: lookup xxxxx@127.0.0.1: no such host"},
		{"short host pgx misread from a raw @",
			"postgres://u:pa@ss@127.0.0.1:1/db",
			"lookup ss@127.0.0.1: no such host",
			"lookup xxxxx@127.0.0.1: no such host"},
		{"the URL, whole",
			"postgres://u:S3cret PW@host/db",
			"invalid database URL postgres://u:S3cret PW@host/db",
			"invalid database URL postgres://u:xxxxx@host/db"},
		{"the URL by %q, short password",
			`amqp://u:a"b c@h/`,
			fmt.Sprintf("parse %q: net/url: invalid userinfo", `amqp://u:a"b c@h/`),
			`parse "amqp://u:xxxxx@h/": net/url: invalid userinfo`},
		{"a prefix net/url took for the port",
			"amqps://u:S3cret/PW@127.0.0.1:1/",
			`parse "amqps://u:S3cret": invalid port ":S3cret" after host`,
			`parse "amqps://u:xxxxx": invalid port ":xxxxx" after host`},
		{"percent-decoded",
			"postgres://u:p%40ss%20w0rd@h/db",
			"password p@ss w0rd rejected",
			"password xxxxx rejected"},
		{"re-encoded",
			"amqp://u:p@ss@h/",
			"amqp://u:p%40ss@h:5672/",
			"amqp://u:xxxxx@h:5672/"},
		{"other URLs still redacted",
			"postgres://u:S3cret@h/db",
			"dial amqp://bob:pa55word@rabbit/: refused",
			"dial amqp://bob:xxxxx@rabbit/: refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := RedactTextFor(c.text, c.url); got != c.want {
				t.Errorf("RedactTextFor(%q, %q)\n = %q\nwant %q", c.text, c.url, got, c.want)
			}
		})
	}
	if got := RedactTextFor("no URL here", "", "postgres://root@h/db"); got != "no URL here" {
		t.Errorf("RedactTextFor with URLs holding no password changed the text: %q", got)
	}
}

func TestRedactNeverPanics(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "://", "a://", "@", "postgres://", "postgres://@", "postgres://:@", "password=",
		"password='", `password='\`, "x=y password", "[", "postgres://[", "postgres://u:p@[::1", "u:p@", ":@"} {
		_ = Redact(s)
		_ = RedactText(s)
		_ = Address(s)
		_ = RedactTextFor(s, s)
		if strings.Contains(s, "p@") && strings.Contains(Redact(s), ":p@") {
			t.Errorf("Redact(%q) = %q", s, Redact(s))
		}
	}
}

func TestHasPassword(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"postgres://alice:s3cret@db/expiryctl":              true,
		"postgres://alice:x@db/expiryctl":                   true,
		"postgres://alice@db/expiryctl?password=pw":         true,
		"postgres://alice@db/expiryctl?sslpassword=keypass": true,
		"host=db user=alice password='a b'":                 true,
		"amqp://guest:guest@127.0.0.1:5672/":                true,
		"postgres://alice@db/expiryctl":                     false,
		"postgres:///expiryctl?service=prod":                false,
		"host=db user=alice":                                false,
		"":                                                  false,
	} {
		if got := HasPassword(raw); got != want {
			t.Errorf("HasPassword(%q) = %v, want %v", raw, got, want)
		}
	}
}
