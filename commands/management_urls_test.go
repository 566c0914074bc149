package commands

import (
	"slices"
	"testing"
)

// TestManagementURLsOfACluster: without a management URL, each node of
// --amqp-url gives its own; given, the flag (repeated or comma-separated)
// or the environment lists them.
func TestManagementURLsOfACluster(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "one per AMQP node", args: []string{"--amqp-url", "amqp://ops:pw@rabbit-a:5672/,amqp://ops:pw@rabbit-b:5672/"},
			want: []string{"http://ops:pw@rabbit-a:15672/", "http://ops:pw@rabbit-b:15672/"}},
		{name: "the flag repeated", args: []string{"--management-url", "http://m@a:15672/", "--management-url", "http://m@b:15672/"},
			want: []string{"http://m@a:15672/", "http://m@b:15672/"}},
		{name: "the flag comma-separated over the env", args: []string{"--management-url", "http://m@a:15672/, http://m@b:15672/"},
			env:  map[string]string{"EXPIRYCTL_MANAGEMENT_URL": "http://env@c:15672/"},
			want: []string{"http://m@a:15672/", "http://m@b:15672/"}},
		{name: "the env comma-separated", env: map[string]string{"EXPIRYCTL_MANAGEMENT_URL": "http://env@c:15672/,http://env@d:15672/"},
			want: []string{"http://env@c:15672/", "http://env@d:15672/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			f.Getenv = func(k string) string { return tc.env[k] }
			root := NewCmdRoot(f)
			root.SetArgs(append(tc.args, "dlq", "summary", "--help"))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := f.ManagementURLs(); !slices.Equal(got, tc.want) {
				t.Errorf("ManagementURLs() = %q, want %q", got, tc.want)
			}
			if len(f.management().Nodes()) != len(tc.want) {
				t.Errorf("the reader has %d nodes, want %d", len(f.management().Nodes()), len(tc.want))
			}
		})
	}
}
