package broker_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/secrettest"
)

// TestDialRedactsPassword dials URLs whose passwords amqp091 (through
// net/url) rejects or misreads and checks that neither the error's message
// nor its %#v shows any of the password. Nothing listens on 127.0.0.1:1, so
// nothing real is needed.
func TestDialRedactsPassword(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url string
		hidden    []string
		want      string
	}{
		{"space", "amqp://u:S3cret PW@127.0.0.1:1/", []string{"S3cret PW", "S3cret"},
			"invalid AMQP URL amqp://u:xxxxx@127.0.0.1:1/: URI must not contain whitespace"},
		// net/url ends the authority at the "/" and quotes the URL, and the
		// password's head as the port, in its error.
		{"raw /", "amqps://u:S3cret/PW@127.0.0.1:1/", []string{"S3cret/PW", "S3cret"},
			`invalid AMQP URL amqps://u:xxxxx@127.0.0.1:1/: parse "amqps://u:xxxxx@127.0.0.1:1/": invalid port ":xxxxx" after host`},
		{"raw #", "amqp://u:S3cret#PW@127.0.0.1:1/", []string{"S3cret#PW", "S3cret"}, `parse "amqp://u:xxxxx": invalid port ":xxxxx" after host`},
		{"raw /, a port", "amqp://localhost:12/S3cretPW@127.0.0.1:1/", []string{"12/S3cretPW", "S3cretPW"}, "cannot reach RabbitMQ at 127.0.0.1:1: "},
		{"raw @", "amqp://u:pa@ssS3cretPW5@127.0.0.1:1/", []string{"pa@ssS3cretPW5", "ssS3cretPW5"}, "cannot reach RabbitMQ at 127.0.0.1:1: "},
		{"quote", `amqp://u:S3cret"PW@127.0.0.1:1/`, []string{`S3cret"PW`, `S3cret\"PW`}, `parse "amqp://u:xxxxx@127.0.0.1:1/": net/url: invalid userinfo`},
		{"bad escape", "amqp://u:S3cr%zzetPW@127.0.0.1:1/", []string{"S3cr%zzetPW"}, `parse "amqp://u:xxxxx@127.0.0.1:1/": invalid URL escape "%zz"`},
		{"non-ASCII", "amqps://u:pässwörd€@127.0.0.1:1/", []string{"pässwörd€", `p\u00e4ssw`}, `parse "amqps://u:xxxxx@127.0.0.1:1/": net/url: invalid userinfo`},
		{"invalid UTF-8", "amqp://u:S3cret\xff@127.0.0.1:1/", []string{"S3cret\xff", `S3cret\xff`}, `parse "amqp://u:xxxxx@127.0.0.1:1/"`},
		{"percent-encoded", "amqp://u:p%40ss%20S3cret@127.0.0.1:1/", []string{"p%40ss%20S3cret", "p@ss S3cret"}, "cannot reach RabbitMQ at 127.0.0.1:1: "},
		{"a PostgreSQL URL", "postgres://u:pa@ssS3cretPW5@127.0.0.1:1/db", []string{"pa@ssS3cretPW5", "ssS3cretPW5"},
			"invalid AMQP URL postgres://u:xxxxx@127.0.0.1:1/db: AMQP scheme"},
		{"no scheme", "u:S3cretPW@127.0.0.1:1/", []string{"S3cretPW"}, "invalid AMQP URL u:xxxxx@127.0.0.1:1/: "},
		{"user only", "amqp://guest@127.0.0.1:1/", nil, "cannot reach RabbitMQ at 127.0.0.1:1: dial tcp 127.0.0.1:1: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := broker.Dial(c.url)
			if err == nil {
				conn.Close()
				t.Fatalf("Dial(%q) succeeded", c.url)
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

// FuzzDialRedactsPassword types a fuzzed password into AMQP URLs and checks
// that the error broker.Dial returns, whether amqp091 rejected the URL or
// could not reach the broker it read, shows no recognisable form of the
// password beyond what the message's fixed text says anyway.
func FuzzDialRedactsPassword(f *testing.F) {
	for _, pw := range []string{"S3cret PW", "pa@ssS3cretPW5", "12/S3cretPW", "S3cret/PW", "S3cret#PW", "S3cret?PW",
		"p%40ss%20w0rd", "S3cr%zzet", `it's "S3cret"`, "pässwörd€", "\xffS3cret", `000,0"00000#`} {
		f.Add(pw)
	}
	shapes := []struct {
		build func(pw string) string
		raw   bool // the password is typed as is into the URL
	}{
		{func(pw string) string { return "amqp://u:" + pw + "@127.0.0.1:1/" }, true},
		// The user is "localhost" so that when net/url ends the authority
		// inside the password, the host it reads is still this machine.
		{func(pw string) string { return "amqps://localhost:" + pw + "@127.0.0.1:1/vhost" }, true},
		{func(pw string) string { return "amqp://" + url.UserPassword("u", pw).String() + "@127.0.0.1:1/" }, false},
	}
	fixed := (&broker.ConnectError{Err: errors.New("")}).Error() + "invalid AMQP URL"
	f.Fuzz(func(t *testing.T, pw string) {
		for _, shape := range shapes {
			raw := shape.build(pw)
			// Dial only this machine: a URL amqp091 accepts may name any host.
			if uri, err := amqp.ParseURI(raw); err == nil && uri.Host != "127.0.0.1" && uri.Host != "localhost" {
				continue
			}
			conn, err := broker.Dial(raw)
			if err == nil {
				conn.Close()
				continue
			}
			for _, text := range []string{err.Error(), secrettest.GoSyntax(err)} {
				for _, form := range secrettest.Forms(pw, shape.raw, 4) {
					if secrettest.CountOutsideMasks(text, form) > 0 && !strings.Contains(fixed, form) {
						t.Errorf("broker.Dial(%q) shows %q:\n%s", raw, form, text)
					}
				}
			}
		}
	})
}
