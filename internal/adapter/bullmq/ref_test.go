package bullmq_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
)

func TestParseRef(t *testing.T) {
	t.Setenv(bullmq.PasswordEnv, "")
	tests := []struct {
		in   string
		want bullmq.Ref
		name string
	}{
		{"bullmq://127.0.0.1/expiry", bullmq.Ref{Host: "127.0.0.1", Port: 6379, Prefix: "bull", Queue: "expiry"},
			"bullmq://127.0.0.1:6379/0/bull/expiry"},
		{"bullmq://redis.internal:6380/3/expiry?prefix=jobs", bullmq.Ref{Host: "redis.internal", Port: 6380, DB: 3, Prefix: "jobs", Queue: "expiry"},
			"bullmq://redis.internal:6380/3/jobs/expiry"},
		{"bullmq://ops:s3cret@[::1]:7000/expiry?tls=true", bullmq.Ref{Host: "::1", Port: 7000, Prefix: "bull", Queue: "expiry", Username: "ops", Password: "s3cret", TLS: true},
			"bullmq://[::1]:7000/0/bull/expiry"},
		// A letter's queue name is a reference again.
		{"bullmq://127.0.0.1:6379/2/%7Bbull%7D/reservation-expiry", bullmq.Ref{Host: "127.0.0.1", Port: 6379, DB: 2, Prefix: "{bull}", Queue: "reservation-expiry"},
			"bullmq://127.0.0.1:6379/2/%7Bbull%7D/reservation-expiry"},
		{"BULLMQ://h/q%20one", bullmq.Ref{Host: "h", Port: 6379, Prefix: "bull", Queue: "q one"}, "bullmq://h:6379/0/bull/q%20one"},
	}
	for _, tt := range tests {
		got, err := bullmq.ParseRef(tt.in)
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseRef(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if got.Name() != tt.name {
			t.Errorf("ParseRef(%q).Name() = %q, want %q", tt.in, got.Name(), tt.name)
		}
		again, err := bullmq.ParseRef(got.Name())
		if err != nil || again.Name() != got.Name() {
			t.Errorf("ParseRef(%q) = %v, %v: a name does not read back", got.Name(), again, err)
		}
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
