package dsn

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"postgres://root:s3cret@127.0.0.1:5432/expiryctl", "postgres://root:xxxxx@127.0.0.1:5432/expiryctl"},
		{"amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:xxxxx@127.0.0.1:5672/"},
		{"postgres://root@127.0.0.1/db", "postgres://root@127.0.0.1/db"},
		{"postgres://127.0.0.1/db?password=hunter2&sslmode=disable", "postgres://127.0.0.1/db?password=xxxxx&sslmode=disable"},
		{"host=127.0.0.1 password=hunter2 user=root", "host=127.0.0.1 password=xxxxx user=root"},
	}
	for _, c := range cases {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	msg := `failed to connect to amqp://bob:pa55word@rabbit:5672/ and postgres://a:b@h/d: refused`
	got := RedactText(msg)
	for _, secret := range []string{"pa55word", ":b@"} {
		if strings.Contains(got, secret) {
			t.Errorf("RedactText left %q in %q", secret, got)
		}
	}
	if !strings.Contains(got, "rabbit:5672") {
		t.Errorf("RedactText lost the address: %q", got)
	}
}
