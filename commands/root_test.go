package commands

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/store"
)

// TestWrongCommandsAreUsageErrors: a mistyped command, at any depth, says
// what would be right and exits 2; a stray argument exits 2 too; a group
// alone still shows its help.
func TestWrongCommandsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"dlqq"}, ExitUsage, "Did you mean this?\n\tdlq"},
		{[]string{"dlq", "lst"}, ExitUsage, "Did you mean this?\n\tlist"},
		{[]string{"replay", "aprove", "7"}, ExitUsage, "Did you mean this?\n\tapprove"},
		{[]string{"audit", "verfy"}, ExitUsage, "Did you mean this?\n\tverify"},
		{[]string{"dlq", "frobnicate"}, ExitUsage, `unknown command "frobnicate" for "expiryctl dlq"`},
		{[]string{"dlq", "summary", "extra"}, ExitUsage, `unknown command "extra" for "expiryctl dlq summary"`},
		{[]string{"dlq"}, ExitOK, "Available Commands:"},
		{[]string{"dlq", "list", "--limt", "3"}, ExitUsage, "unknown flag: --limt\n\nDid you mean this?\n\t--limit"},
		{[]string{"dlq", "list", "--databse-url", "x"}, ExitUsage, "Did you mean this?\n\t--database-url"},
		{[]string{"dlq", "list", "--zzzzzz"}, ExitUsage, "unknown flag: --zzzzzz"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			f, out, _ := testFactory(t)
			root := NewCmdRoot(f)
			root.SetArgs(tc.args)
			err := root.Execute()
			if code := ExitCode(err); code != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tc.wantCode)
			}
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to say %q", got, tc.want)
			}
			if f.pool != nil || f.amqpConn != nil {
				t.Fatal("a usage error opened a connection")
			}
		})
	}
}

// TestEveryCommandHasExamples: `--help` of every command a person runs
// shows how to run it (cobra's own help and completion commands aside).
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	f, _, _ := testFactory(t)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" || cmd.HasParent() && cmd.Parent().Name() == "completion" {
			return
		}
		if strings.TrimSpace(cmd.Example) == "" {
			t.Errorf("%s has no examples", cmd.CommandPath())
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(f))
}

// TestDeprecatedFlagNoticeGoesToStderr: a deprecated flag's notice is
// status, not data; on stdout it would be the first line of an export.
func TestDeprecatedFlagNoticeGoesToStderr(t *testing.T) {
	t.Parallel()
	f, out, errOut := testFactory(t)
	// A terminal on stdout makes audit export stop before it connects.
	f.IO.StdoutTTY = true
	root := NewCmdRoot(f)
	root.SetArgs([]string{"audit", "export", "--format", "ndjson"})
	_ = root.Execute()
	if strings.Contains(out.String(), "deprecated") {
		t.Errorf("stdout has the deprecation notice: %q", out.String())
	}
	if !strings.Contains(errOut.String(), "Flag --format has been deprecated, use -o/--output") {
		t.Errorf("stderr = %q, want the deprecation notice", errOut.String())
	}
}

// TestAdvisoryWarningOnlyWhereGovernanceBinds: the warning that governance
// is advisory is one line that fits 80 columns, and only the commands that
// governance binds say it; every one named exists, so a rename cannot
// silently drop it.
func TestAdvisoryWarningOnlyWhereGovernanceBinds(t *testing.T) {
	t.Parallel()
	line := advisoryLine(store.Standing{Login: "expiryctl_owner", Owner: true})
	if len(line) > 80 || strings.Contains(line, "\n") || !strings.Contains(line, "governance is advisory") {
		t.Errorf("advisory line is %d columns: %q", len(line), line)
	}
	f, _, _ := testFactory(t)
	root := NewCmdRoot(f)
	for path := range governedCommands {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.CommandPath() != "expiryctl "+path {
			t.Errorf("governed command %q is not in the tree", path)
		}
	}
	for args, want := range map[string]bool{"dlq list": false, "audit list": false, "replay show 1": false,
		"replay approve 1": true, "dlq discard --id 1": true} {
		f, _, _ := testFactory(t)
		root := NewCmdRoot(f)
		root.SetArgs(append(strings.Fields(args), "--help"))
		cmd, _, _ := root.Find(strings.Fields(args))
		root.PersistentPreRun(cmd, nil)
		if f.Governed != want {
			t.Errorf("%s: Governed = %v, want %v", args, f.Governed, want)
		}
	}
}
