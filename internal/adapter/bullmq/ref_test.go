package bullmq_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
)

// TestParseRef: a URL typed on the command line names its server, and
// the Ref's connection is the name config.DeriveName gives that server;
// the queue's name carries that name, never the server or the login.
func TestParseRef(t *testing.T) {
	t.Setenv(bullmq.PasswordEnv, "")
	tests := []struct {
		in                   string
		want                 bullmq.Ref
		authority, db, queue string // the server DeriveName names; the queue's part of Name
	}{
		{"bullmq://127.0.0.1/expiry", bullmq.Ref{Host: "127.0.0.1", Port: 6379, Prefix: "bull", Queue: "expiry"},
			"127.0.0.1:6379", "0", "bull/expiry"},
		{"bullmq://redis.internal:6380/3/expiry?prefix=jobs", bullmq.Ref{Host: "redis.internal", Port: 6380, DB: 3, Prefix: "jobs", Queue: "expiry"},
			"redis.internal:6380", "3", "jobs/expiry"},
		{"bullmq://ops:s3cret@[::1]:7000/expiry?tls=true", bullmq.Ref{Host: "::1", Port: 7000, Prefix: "bull", Queue: "expiry", Username: "ops", Password: "s3cret", TLS: true},
			"[::1]:7000", "0", "bull/expiry"},
		// DB, prefix and queue in the path, the prefix escaped.
		{"bullmq://127.0.0.1:6379/2/%7Bbull%7D/reservation-expiry", bullmq.Ref{Host: "127.0.0.1", Port: 6379, DB: 2, Prefix: "{bull}", Queue: "reservation-expiry"},
			"127.0.0.1:6379", "2", "%7Bbull%7D/reservation-expiry"},
		{"BULLMQ://h/q%20one", bullmq.Ref{Host: "h", Port: 6379, Prefix: "bull", Queue: "q one"}, "h:6379", "0", "bull/q%20one"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := bullmq.ParseRef(tt.in)
			if err != nil {
				t.Fatalf("ParseRef: %v", err)
			}
			tt.want.Conn = config.DeriveName(bullmq.System, tt.authority, tt.db)
			if got != tt.want {
				t.Errorf("ParseRef = %#v, want %#v", got, tt.want)
			}
			if want := "bullmq://" + tt.want.Conn + "/" + tt.queue; got.Name() != want {
				t.Errorf("Name() = %q, want %q", got.Name(), want)
			}
			if got.Server() != tt.authority+"/"+tt.db {
				t.Errorf("Server() = %q, want %s/%s", got.Server(), tt.authority, tt.db)
			}
			for _, hidden := range []string{tt.authority, "@", "s3cret"} {
				if strings.Contains(got.Name(), hidden) {
					t.Errorf("Name() %q shows %q", got.Name(), hidden)
				}
			}
			// The name reads back as the connection and the queue.
			conn, queue, err := bullmq.SplitName(got.Name())
			if err != nil || conn != got.Conn || queue != tt.queue {
				t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q", got.Name(), conn, queue, err, got.Conn, tt.queue)
			}
		})
	}
}

func TestParseRefRefusesAndHidesThePassword(t *testing.T) {
	t.Setenv(bullmq.PasswordEnv, "")
	for _, in := range []string{
		"bullmq://u:hunter2@h",                  // no queue
		"bullmq://u:hunter2@h/1/2/3/4",          // too deep
		"bullmq://u:hunter2@h/x/q",              // db not a number
		"bullmq://u:hunter2@h:99999/q",          // port
		"bullmq://u:hunter2@h/q?prefix=a&tls=z", // tls
		"bullmq://u:hunter2@h/q?db=1",           // unknown parameter
		"bullmq://u:hunter2@h/0/p/q?prefix=other",
		"bullmq://u:hunter2@h/a:b",
		"bullmq://u:hunter2@h:port/q", // url cannot parse it
		"bullmq://u:hun/ter2@h/q%zz",  // nor this
		"redis://u:hunter2@h/q",       // not bullmq://
	} {
		_, err := bullmq.ParseRef(in)
		if err == nil {
			t.Errorf("ParseRef(%q) accepted it", in)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter2") {
			t.Errorf("ParseRef(%q) = %v: the error shows the password", in, err)
		}
	}
}

func TestParseRefPasswordFromEnv(t *testing.T) {
	t.Setenv(bullmq.PasswordEnv, "from-env")
	r, err := bullmq.ParseRef("bullmq://h/q")
	if err != nil {
		t.Fatal(err)
	}
	if r.Password != "from-env" || r.Options().Password != "from-env" {
		t.Errorf("password %q, want the environment's", r.Password)
	}
	r, _ = bullmq.ParseRef("bullmq://:given@h/q")
	if r.Password != "given" {
		t.Errorf("password %q, want the reference's over the environment's", r.Password)
	}
	for _, shown := range []string{r.Name(), fmt.Sprintf("%v", r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), fmt.Sprint(&r)} {
		if strings.Contains(shown, "given") {
			t.Errorf("%q shows the password", shown)
		}
	}
}

func TestIsRef(t *testing.T) {
	for in, want := range map[string]bool{"bullmq://h/q": true, "BullMQ://h/q": true, "reservation-expiry.dlq": false, "river://h/db/q": false, "bullmq:/": false} {
		if got := bullmq.IsRef(in); got != want {
			t.Errorf("IsRef(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestSplitName: a letter's queue name is a connection's name and the
// queue; one whose first part could say which server to dial is refused.
func TestSplitName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, conn, queue string }{
		{"bullmq://orders/bull/expiry", "orders", "bull/expiry"},
		{"BULLMQ://orders/bull/expiry", "orders", "bull/expiry"},
		{"bullmq://redis.prod-2_a/%7Bbull%7D/q%20one", "redis.prod-2_a", "%7Bbull%7D/q%20one"},
		{"bullmq://" + strings.Repeat("c", 63) + "/bull/q", strings.Repeat("c", 63), "bull/q"},
	} {
		conn, queue, err := bullmq.SplitName(tt.name)
		if err != nil || conn != tt.conn || queue != tt.queue {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q", tt.name, conn, queue, err, tt.conn, tt.queue)
		}
	}
	for _, name := range []string{
		"bullmq://127.0.0.1:6379/0/bull/expiry",        // a server, as letters named queues before connections
		"bullmq://[::1]:6379/0/bull/expiry",            // an IPv6 server
		"bullmq://redis.internal/0/bull/expiry",        // a host with a database: one segment too many
		"bullmq://ops@orders/bull/expiry",              // a login
		"bullmq://ops:hunter2@orders/bull/expiry",      // a login with its password
		"bullmq://orders/bull/expiry/more",             // too many segments
		"bullmq://orders/expiry",                       // no prefix
		"bullmq://orders",                              // no queue at all
		"bullmq://orders/",                             // nor here
		"bullmq:///bull/expiry",                        // no connection
		"bullmq://orders//expiry",                      // an empty prefix
		"bullmq://orders/bull/",                        // an empty queue
		"bullmq://orders/bull/expiry?prefix=x",         // settings
		"bullmq://orders/bull/expiry#x",                // a fragment
		"bullmq://-orders/bull/expiry",                 // not a connection's name
		"bullmq://" + strings.Repeat("c", 64) + "/b/q", // nor is this, too long
		"redis://orders/bull/expiry",                   // not BullMQ's
	} {
		conn, queue, err := bullmq.SplitName(name)
		if err == nil {
			t.Errorf("SplitName(%q) = %q, %q; want it refused", name, conn, queue)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("SplitName(%q): the error shows the password: %v", name, err)
		}
	}
}

// TestRefFor: a configured connection's URL gives the server, the
// database, TLS and the login; the queue's part gives the prefix and the
// queue; the password argument counts only when the URL holds none.
func TestRefFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, password, queue string
		want                 bullmq.Ref
	}{
		{"redis://127.0.0.1", "", "expiry",
			bullmq.Ref{Conn: "orders", Host: "127.0.0.1", Port: 6379, Prefix: "bull", Queue: "expiry"}},
		{"redis://redis.internal:6380/3", "from-secret", "jobs/expiry",
			bullmq.Ref{Conn: "orders", Host: "redis.internal", Port: 6380, DB: 3, Prefix: "jobs", Queue: "expiry", Password: "from-secret"}},
		{"rediss://ops@redis.internal/2", "from-secret", "bull/expiry",
			bullmq.Ref{Conn: "orders", Host: "redis.internal", Port: 6379, DB: 2, Prefix: "bull", Queue: "expiry", Username: "ops", Password: "from-secret", TLS: true}},
		{"redis://ops:in-url@cache.internal:7000/0", "from-secret", "%7Bbull%7D/q%20one",
			bullmq.Ref{Conn: "orders", Host: "cache.internal", Port: 7000, Prefix: "{bull}", Queue: "q one", Username: "ops", Password: "in-url"}},
		{"redis://[::1]:7000/", "", "bull/expiry",
			bullmq.Ref{Conn: "orders", Host: "::1", Port: 7000, Prefix: "bull", Queue: "expiry"}},
	}
	for _, tt := range tests {
		got, err := bullmq.RefFor(config.Connection{Name: "orders", System: bullmq.System, URLs: []string{tt.url}}, tt.password, tt.queue)
		if err != nil {
			t.Errorf("RefFor(%s, %s): %v", tt.url, tt.queue, err)
			continue
		}
		if got != tt.want {
			t.Errorf("RefFor(%s, %s) = %+v, want %+v", tt.url, tt.queue, got, tt.want)
		}
		o := got.Options()
		if o.DB != tt.want.DB || o.Addr != tt.want.Addr() || o.Password != tt.want.Password || (o.TLSConfig != nil) != tt.want.TLS {
			t.Errorf("RefFor(%s): options reach %s db %d, TLS %v; want %s db %d, TLS %v", tt.url, o.Addr, o.DB, o.TLSConfig != nil, tt.want.Addr(), tt.want.DB, tt.want.TLS)
		}
		if o.TLSConfig != nil && o.TLSConfig.ServerName != tt.want.Host {
			t.Errorf("RefFor(%s): TLS verifies %q, want %q", tt.url, o.TLSConfig.ServerName, tt.want.Host)
		}
		if !strings.HasPrefix(got.Name(), "bullmq://orders/") {
			t.Errorf("RefFor(%s).Name() = %q, want it on connection orders", tt.url, got.Name())
		}
		for _, hidden := range []string{tt.want.Host, "ops", "in-url", "from-secret"} {
			if strings.Contains(got.Name(), hidden) || strings.Contains(fmt.Sprintf("%v %+v %#v", got, got, got), hidden) {
				t.Errorf("RefFor(%s) printed shows %q: %s", tt.url, hidden, got.Name())
			}
		}
	}
	for _, tt := range []struct{ url, queue string }{
		{"", "bull/expiry"},                           // no url
		{"redis://h/x", "bull/expiry"},                // a database that is not a number
		{"redis://h/-1", "bull/expiry"},               // nor is this one
		{"redis://h:99999/0", "bull/expiry"},          // not a port
		{"redis://h/0?tls=true", "bull/expiry"},       // settings: rediss:// says TLS
		{"redis://h/0", "a/b/c"},                      // PREFIX/QUEUE at most
		{"redis://h/0", "bull/a:b"},                   // a BullMQ queue has no ':'
		{"redis://h/0", ""},                           // no queue
		{"redis://h/0", "bull/"},                      // an empty queue
		{"redis://h/0", "bull/%zz"},                   // badly escaped
		{"redis://u:hunter2@h:port/0", "bull/expiry"}, // not a URL: the error must not show it
	} {
		c := config.Connection{Name: "orders", System: bullmq.System}
		if tt.url != "" {
			c.URLs = []string{tt.url}
		}
		got, err := bullmq.RefFor(c, "", tt.queue)
		if err == nil {
			t.Errorf("RefFor(%q, %q) = %+v; want it refused", tt.url, tt.queue, got)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("RefFor(%q): the error shows the password: %v", tt.url, err)
		}
	}
}

// TestConfigRules: a BullMQ connection is one redis:// or rediss:// URL;
// Redis has no operating-system user, so no login is needed.
func TestConfigRules(t *testing.T) {
	t.Parallel()
	if bullmq.ConfigRules.System != bullmq.System {
		t.Errorf("ConfigRules are %q's", bullmq.ConfigRules.System)
	}
	for _, urls := range [][]string{
		{"redis://127.0.0.1:6379/0"},
		{"redis://redis.internal"},
		{"rediss://ops@redis.internal:6380/2"},
	} {
		if err := bullmq.ConfigRules.Check(config.Connection{Name: "orders", System: bullmq.System, URLs: urls}); err != nil {
			t.Errorf("Check(%v): %v", urls, err)
		}
	}
	for _, urls := range [][]string{
		nil,
		{"postgres://app@h/db"},
		{"http://u:hunter2@h/0"},
		{"redis:///0"},
		{"redis://h/x"},
		{"redis://h/0?tls=true"},
		{"redis://a/0", "redis://b/0"},
	} {
		err := bullmq.ConfigRules.Check(config.Connection{Name: "orders", System: bullmq.System, URLs: urls})
		if err == nil {
			t.Errorf("Check(%v) took it", urls)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Check(%v): the error shows the password: %v", urls, err)
		}
	}
}
