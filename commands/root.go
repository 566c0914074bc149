package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/replay"
)

// Main runs expiryctl with the process's arguments and returns its exit code.
// It is the only place that prints a command's error.
func Main() int {
	f := NewFactory()
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := NewCmdRoot(f)
	cmd, err := root.ExecuteContextC(ctx)
	return reportError(f, cmd, err)
}

// reportError prints err, returned by cmd, and returns the exit code.
func reportError(f *Factory, cmd *cobra.Command, err error) int {
	if err == nil {
		return ExitOK
	}
	code := ExitCode(err)
	if code == ExitCancelled && errors.Is(err, context.Canceled) {
		// "cancelled" would read as a replay request cancelled for good:
		// an interrupted run says its request still runs and how to
		// resume it; anything else was only interrupted.
		var run *replay.InterruptedError
		if errors.As(err, &run) {
			fmt.Fprintln(f.IO.ErrOut, "interrupted:", run)
		} else {
			fmt.Fprintln(f.IO.ErrOut, "interrupted")
		}
		return code
	}
	fmt.Fprintln(f.IO.ErrOut, "error:", dsn.Scrub(dsn.RedactTextFor(err.Error(), f.connectionURLs()...), f.configSecrets()...))
	var flagErr *FlagError
	if errors.As(err, &flagErr) && cmd != nil {
		fmt.Fprintf(f.IO.ErrOut, "\nUsage:  %s\nRun `%s --help` for examples.\n", cmd.UseLine(), cmd.CommandPath())
	}
	return code
}

// NewCmdRoot builds the whole command tree over f.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "expiryctl <command>",
		Short: "Triage and governed replay of dead-lettered reservation-expiry jobs",
		Long: rootHelp() + `

It reaches each queue system through a connection the configuration file
names (expiryctl config view; docs/configuration.md).

Every command, reads included, leaves a row in the audit trail.`,
		Example: `  # capture the dead-letter queue, then see what failed and why
  expiryctl dlq ingest --queue reservation-expiry.dlq
  expiryctl dlq summary
  expiryctl dlq list --reason transient-exhausted --limit 20
  expiryctl dlq show 42`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       readBuildVersion().String(),
	}
	root.SetVersionTemplate("expiryctl {{.Version}}\n")
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(flagError)

	pf := root.PersistentFlags()
	pf.StringVar(&f.ConfigFlag, "config", "",
		"the configuration file: contexts naming the archive and each queue system's connections (env EXPIRYCTL_CONFIG; default $XDG_CONFIG_HOME/expiryctl/config.yaml)")
	pf.StringVar(&f.ContextFlag, "context", "",
		"the configuration's context to use (env EXPIRYCTL_CONTEXT; default the file's current-context)")
	pf.StringVar(&f.DatabaseURLFlag, "database-url", "",
		"PostgreSQL URL (env EXPIRYCTL_DATABASE_URL; default the context's archive, else postgres://root@127.0.0.1:5432/expiryctl)")
	pf.Var(&urlList{target: &f.AMQPURLFlag}, "amqp-url",
		"RabbitMQ URL, or a cluster's node URLs (repeated or comma-separated), tried in order (env EXPIRYCTL_AMQP_URL, comma-separated; default amqp://guest:***@127.0.0.1:5672/)")
	pf.Var(&urlList{target: &f.ManagementURLFlag}, "management-url",
		"RabbitMQ management API URL, or one per node (repeated or comma-separated), read for the live queues, the handler check and pacing, tried in turn while one does not answer (env EXPIRYCTL_MANAGEMENT_URL, comma-separated; default each RabbitMQ URL's host and credentials over http on port 15672)")
	pf.StringVar(&f.ActorFlag, "actor", "",
		"a label for the audit trail, recorded beside your database login (env EXPIRYCTL_ACTOR; default the login itself)")
	f.timeoutFlags(pf)

	root.AddGroup(&cobra.Group{ID: "triage", Title: "Triage:"}, &cobra.Group{ID: "governance", Title: "Governance:"},
		&cobra.Group{ID: "setup", Title: "Setup:"})
	for _, cmd := range []*cobra.Command{NewCmdDLQ(f), NewCmdTUI(f, nil), NewCmdMetrics(f)} {
		cmd.GroupID = "triage"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{NewCmdReplay(f), NewCmdPolicy(f), NewCmdAudit(f), NewCmdAccess(f), NewCmdKeys(f)} {
		cmd.GroupID = "governance"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{NewCmdMigrate(f, nil), NewCmdConfig(f), NewCmdDemo(f, nil), NewCmdWorker(f, nil), NewCmdVersion(f)} {
		cmd.GroupID = "setup"
		root.AddCommand(cmd)
	}
	// `expiryctl` alone opens the terminal UI when there is a terminal to
	// open it in, and shows help otherwise.
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if f.IO.StdoutTTY && isTerminal(f.IO.In) {
			return NewCmdTUI(f, nil).RunE(cmd, nil)
		}
		return cmd.Help()
	}
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		f.Governed = governedCommands[strings.TrimPrefix(cmd.CommandPath(), "expiryctl ")] || cmd == root
		f.warnPasswordsInArgs()
	}
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	argumentsAreUsage(root)
	completeIDs(root, f)
	flagNoticesToStderr(root, f.IO.ErrOut)
	return root
}

// flagNoticesToStderr sends what pflag says while parsing (a deprecated
// flag's notice) to stderr: cobra prints it to the command's output, which
// is stdout here, so `audit export --format ndjson | jq` would read the
// notice as the first row.
func flagNoticesToStderr(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().SetOutput(w)
	for _, sub := range cmd.Commands() {
		flagNoticesToStderr(sub, w)
	}
}

// governedCommands are the commands that governance binds, named by their
// path below the root: they request, decide, run or change what four-eyes,
// frozen cohorts and the policy guard (the TUI, and the bare root that
// opens it, does all of these). Only they warn that governance is advisory
// for a superuser's or owner's login; a read is not governed.
var governedCommands = map[string]bool{
	"replay request": true, "replay approve": true, "replay reject": true, "replay run": true, "replay cancel": true,
	"dlq discard": true, "dlq purge": true,
	"policy set": true, "policy approve": true, "policy reject": true,
	"access grant": true, "access revoke": true,
	"tui": true,
}

// argumentsAreUsage makes a wrong argument a usage error everywhere in the
// tree (exit 2, as docs/exit-codes.md says), and a mistyped command name say
// which commands it may have meant: cobra suggests only below a root that
// accepts arbitrary arguments, and a command that only groups others would
// otherwise print its help and exit 0.
func argumentsAreUsage(cmd *cobra.Command) {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	switch {
	case cmd.HasSubCommands() && !cmd.Runnable():
		// Runnable now only to catch a wrong name: its usage stays the
		// one line "cmd [command]".
		cmd.SetUsageTemplate(strings.Replace(cmd.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	case cmd.HasSubCommands():
		validate := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			if validate != nil {
				return validate(cmd, args)
			}
			return nil
		}
	case cmd.Args != nil:
		validate := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := validate(cmd, args); err != nil {
				return &FlagError{Err: err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		argumentsAreUsage(sub)
	}
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(name); len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t")
	}
	return &FlagError{Err: errors.New(msg)}
}
