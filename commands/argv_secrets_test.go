package commands

import (
	"strings"
	"testing"
)

func TestPasswordInAURLFlagIsWarnedOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		warn string // "" for no warning
	}{
		{[]string{"--database-url", "postgres://alice:hunter22@db/expiryctl"}, "--database-url carries a password"},
		{[]string{"--database-url", "host=db user=alice password=hunter22"}, "--database-url carries a password"},
		{[]string{"--amqp-url", "amqp://expiryctl@node1:5672/,amqp://expiryctl:hunter22@node2:5672/"}, "--amqp-url carries a password"},
		{[]string{"--management-url", "http://guest:hunter22@127.0.0.1:15672"}, "--management-url carries a password"},
		{[]string{"--database-url", "postgres://alice@db/expiryctl"}, ""},
		{[]string{"--database-url", "postgres:///?service=expiryctl"}, ""},
		{[]string{}, ""},
	} {
		f, _, errOut := testFactory(t)
		if err := runCmd(NewCmdRoot(f), append([]string{"version"}, c.args...)...); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		got := errOut.String()
		if strings.Contains(got, "hunter22") {
			t.Fatalf("%v: the warning echoes the password: %q", c.args, got)
		}
		switch {
		case c.warn == "" && got != "":
			t.Errorf("%v: warned %q, want nothing", c.args, got)
		case c.warn != "" && (!strings.Contains(got, "warning: "+c.warn) || !strings.Contains(got, "instead")):
			t.Errorf("%v: stderr %q, want a warning that %s and where to give it instead", c.args, got, c.warn)
		}
	}
}
