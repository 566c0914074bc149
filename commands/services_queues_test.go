package commands

import (
	"context"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/dsn"
)

// TestManagementURLPrecedence: the flag over the environment over the
// management API of the AMQP URL's broker, whichever way that was set.
func TestManagementURLPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flag     string
		amqpFlag string
		env      map[string]string
		want     string
	}{
		{name: "default", want: "http://guest:guest@127.0.0.1:15672/"},
		{name: "derived from --amqp-url", amqpFlag: "amqp://ops:s3cret@rabbit:5672/prod",
			want: "http://ops:s3cret@rabbit:15672/"},
		{name: "derived from EXPIRYCTL_AMQP_URL", env: map[string]string{"EXPIRYCTL_AMQP_URL": "amqps://ops:s3cret@rabbit/"},
			want: "https://ops:s3cret@rabbit:15671/"},
		{name: "env over derived", amqpFlag: "amqp://ops:s3cret@rabbit/",
			env:  map[string]string{"EXPIRYCTL_MANAGEMENT_URL": "http://monitor:pw@rabbit-mgmt:8080/"},
			want: "http://monitor:pw@rabbit-mgmt:8080/"},
		{name: "flag over env", flag: "http://flag@rabbit:15672/",
			env:  map[string]string{"EXPIRYCTL_MANAGEMENT_URL": "http://env@rabbit:15672/"},
			want: "http://flag@rabbit:15672/"},
		{name: "an unreadable AMQP URL derives nothing", amqpFlag: "http://not-amqp/", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			f.ManagementURLFlag, f.AMQPURLFlag = tc.flag, tc.amqpFlag
			f.Getenv = func(k string) string { return tc.env[k] }
			if got := f.ManagementURL(); got != tc.want {
				t.Errorf("ManagementURL() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestManagementURLFlag: --management-url is a global flag whose help
// names its environment variable and default, and the URL is parsed from
// the command line without dialling anything.
func TestManagementURLFlag(t *testing.T) {
	t.Parallel()
	f, out, _ := testFactory(t)
	root := NewCmdRoot(f)
	root.SetArgs([]string{"--management-url", "http://monitor:S3cretPW@rabbit:15672/", "dlq", "summary", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if f.ManagementURL() != "http://monitor:S3cretPW@rabbit:15672/" {
		t.Errorf("ManagementURL() = %q after the flag", f.ManagementURL())
	}
	help := out.String()
	for _, want := range []string{"--management-url", "EXPIRYCTL_MANAGEMENT_URL", "port 15672"} {
		if !strings.Contains(help, want) {
			t.Errorf("help does not say %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "S3cretPW") || strings.Contains(help, "guest:guest") {
		t.Errorf("help shows a password:\n%s", help)
	}
}

// TestLiveQueuesUnreachable: with no management API to reach, the service
// reports what is missing instead of failing, and an error that quotes the
// management URL is printed without its password.
func TestLiveQueuesUnreachable(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	f.ManagementURLFlag = "http://monitor:S3cretPW@127.0.0.1:1/"
	live, err := f.LiveQueues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	report, err := live.Topology(context.Background(), "reservation-expiry")
	if err != nil {
		t.Fatalf("Topology: %v", err)
	}
	if !strings.Contains(report.Unavailable, "rabbitmq-plugins enable rabbitmq_management") || strings.Contains(report.Unavailable, "S3cretPW") {
		t.Errorf("Unavailable = %q", report.Unavailable)
	}
	if f.amqpConn != nil || f.pool != nil {
		t.Error("reading the live queues opened an AMQP or PostgreSQL connection")
	}
	msg := dsn.RedactTextFor("GET http://monitor:S3cretPW@127.0.0.1:1/api/queues failed near S3cretPW", f.connectionURLs()...)
	if strings.Contains(msg, "S3cretPW") {
		t.Errorf("Main's redaction leaves the management password in %q", msg)
	}
}
