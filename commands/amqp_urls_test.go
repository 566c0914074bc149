package commands

import (
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// TestAMQPURLsFromFlagsAndEnvironment: --amqp-url repeated or
// comma-separated lists a cluster's nodes, in order, and wins over
// EXPIRYCTL_AMQP_URL, itself comma-separated.
func TestAMQPURLsFromFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	const a, b, c = "amqp://u:pwA@a:5672/", "amqp://u:pwB@b:5672/", "amqp://u:pwC@c:5672/"
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"default", "", nil, []string{"amqp://guest:guest@127.0.0.1:5672/"}},
		{"environment", a + "," + b, nil, []string{a, b}},
		{"repeated", "", []string{"--amqp-url", a, "--amqp-url", b + "," + c}, []string{a, b, c}},
		{"flag over environment", c, []string{"--amqp-url=" + a + ", " + b}, []string{a, b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			f.Getenv = func(name string) string {
				if name == "EXPIRYCTL_AMQP_URL" {
					return tc.env
				}
				return ""
			}
			root := NewCmdRoot(f)
			if err := root.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := f.AMQPURLs(); !slices.Equal(got, tc.want) {
				t.Errorf("AMQPURLs = %q, want %q", got, tc.want)
			}
			if f.AMQPURL() != tc.want[0] {
				t.Errorf("AMQPURL = %q, want the first node %q", f.AMQPURL(), tc.want[0])
			}
			for _, u := range tc.want {
				if !slices.Contains(f.connectionURLs(), u) {
					t.Errorf("%s is not among the URLs whose passwords are redacted", u)
				}
			}
		})
	}
}

// TestAMQPGoesToTheNextNode: the factory's connection reaches the first
// node that accepts, and once it is lost the next dial starts at the node
// after it. The broker is listed twice (by address and by name) as two
// nodes, after one that is not there.
func TestAMQPGoesToTheNextNode(t *testing.T) {
	t.Parallel()
	_ = amqptest.Dial(t).Close() // the real broker is there
	byAddress := amqptest.URL()
	byName := strings.Replace(byAddress, "127.0.0.1", "localhost", 1)
	if byName == byAddress {
		t.Skipf("EXPIRYCTL_TEST_AMQP_URL %s names no 127.0.0.1 to spell otherwise", byAddress)
	}
	f, _, _ := testFactory(t)
	f.AMQPURLFlag = "amqp://guest:S3cretPW@127.0.0.1:1/," + byAddress + "," + byName
	t.Cleanup(f.Close)
	for _, want := range []int{1, 2, 1} {
		conn, err := f.AMQP()
		if err != nil {
			t.Fatal(err)
		}
		if f.amqpNode != want {
			t.Errorf("connected to node %d, want %d", f.amqpNode, want)
		}
		_ = conn.Close() // lost: the next dial starts after this node
	}

	f, _, _ = testFactory(t)
	f.AMQPURLFlag = "amqp://guest:S3cretPW@127.0.0.1:1/,amqp://guest:S3cretPW@127.0.0.1:2/"
	_, err := f.AMQP()
	if err == nil || strings.Contains(err.Error(), "S3cretPW") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Errorf("want an error naming both nodes without their passwords: %v", err)
	}
}
