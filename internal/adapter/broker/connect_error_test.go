package broker_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/servers"
)

// TestConnectErrorSaysWhatFailed dials the real broker wrongly in each way
// a person can, and checks that the message names the failure and a next
// step for it: the development hint to start a local broker only where
// nothing answered.
func TestConnectErrorSaysWhatFailed(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(u *url.URL)) string {
		u := *base
		edit(&u)
		return u.String()
	}
	cases := []struct {
		name, url  string
		what, next string
	}{
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "expiryctl-wrong-password") }),
			"RabbitMQ refused the credentials at ", "rabbitmqctl add_user"},
		{"no such virtual host", with(func(u *url.URL) { u.Path = "/expiryctl-no-such-vhost" }),
			"RabbitMQ refused the virtual host at ", "set_permissions -p"},
		// 127.0.0.2 is loopback too, where the local broker does not listen.
		{"nothing listens", with(func(u *url.URL) { u.Host = "127.0.0.2:1" }),
			"cannot reach RabbitMQ at 127.0.0.2:1: ", "scripts/services.sh"},
		// A mistyped port, while the broker runs on its usual one.
		{"the port is mistyped", with(func(u *url.URL) { u.Host = servers.ClosedAddress(t) }),
			"cannot reach RabbitMQ at 127.0.0.1:", "a server answers at 127.0.0.1:5672, RabbitMQ's usual port: check the port"},
		{"TLS to a plain port", with(func(u *url.URL) { u.Scheme = "amqps" }),
			"TLS with RabbitMQ failed at ", "5671"},
		{"no such host", with(func(u *url.URL) { u.Host = "expiryctl-no-such-host.invalid:5672" }),
			"cannot reach RabbitMQ at ", "does not resolve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := broker.Dial(c.url)
			if err == nil {
				_ = conn.Close()
				t.Fatal("connected")
			}
			var connErr *broker.ConnectError
			if !errors.As(err, &connErr) {
				t.Fatalf("error %T %v, want a *broker.ConnectError", err, err)
			}
			msg := err.Error()
			first, next, _ := strings.Cut(msg, "\n")
			if !strings.HasPrefix(first, c.what) || !strings.Contains(next, c.next) {
				t.Errorf("error:\n%s\nwant a first line from %q and a next step naming %q", msg, c.what, c.next)
			}
			if c.next != "scripts/services.sh" && strings.Contains(msg, "services.sh") {
				t.Errorf("a broker that answered gets the hint to start one:\n%s", msg)
			}
		})
	}
}
