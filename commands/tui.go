package commands

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/mattn/go-isatty"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/tui"
)

// TUIOptions holds what `expiryctl tui` needs.
type TUIOptions struct {
	IO *IOStreams
	// Recorder records the session's opening; Services are what the
	// screens call, the same services the other commands use.
	Recorder func(context.Context) (service.Recorder, error)
	Services func(context.Context) (tui.Services, error)

	Refresh time.Duration
	// WorkQueue is the queue whose topology the summary's live queues show.
	WorkQueue string
}

// NewCmdTUI builds `expiryctl tui`.
func NewCmdTUI(f *Factory, runF func(context.Context, *TUIOptions) error) *cobra.Command {
	opts := &TUIOptions{IO: f.IO, Recorder: f.Recorder, Services: f.TUIServices}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Triage and review in a terminal UI",
		Long: `Open the terminal UI: the summary (refreshed live: arrival rate and trend,
overdue holds, the live queues of --work-queue, the last hour's arrivals per
minute, and the letters by reason), the letter list paged from the archive, a
letter's detail, replay and discard requests with approval, running an
approved request, and the audit trail.

It calls the same services as the other commands, under the same rules: a
request still needs a different approver, every view is audited, and every
text taken from a message is shown escaped. Press ? for the keys, q to quit.

A run started here goes on only while the TUI does: q (or ctrl+c) with a
run in progress asks first, to keep it running or to stop it cleanly (the
letters not sent go back to pending, and ` + "`replay run`" + ` resumes the request
with no new approval). ctrl+c exits 130, as an interrupt does.
NO_COLOR turns colours and attributes off.`,
		Example: `  expiryctl tui
  # review as bob in a second terminal, with his own login: four-eyes
  # compares database logins, not labels
  EXPIRYCTL_DATABASE_URL=postgres://bob@127.0.0.1:5432/expiryctl_demo expiryctl tui
  NO_COLOR=1 expiryctl tui --refresh 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Refresh < 0 {
				return flagErrorf("invalid --refresh %s: use a positive duration, e.g. 2s, or 0 to refresh only on keys", opts.Refresh)
			}
			if strings.TrimSpace(opts.WorkQueue) == "" {
				return flagErrorf("--work-queue must name a queue (the default is %s)", worker.NewTopology("").Queue)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return tuiRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", tui.DefaultRefresh, "how often the summary reloads and failed calls are retried")
	cmd.Flags().StringVar(&f.OutcomeURLFlag, "outcome-url", "",
		"the reservation database the policy's gap_query and the runs' outcome queries read, a read-only login (or EXPIRYCTL_OUTCOME_URL)")
	cmd.Flags().StringVar(&opts.WorkQueue, "work-queue", worker.NewTopology("").Queue,
		`the work queue whose retry queues ("<work-queue>.retry.<ms>") and DLQ ("<work-queue>.dlq") the summary shows`)
	return cmd
}

// isTerminal reports whether v is a terminal device.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func tuiRun(ctx context.Context, opts *TUIOptions) error {
	if !opts.IO.StdoutTTY || !isTerminal(opts.IO.In) {
		return flagErrorf("expiryctl tui needs a terminal on stdin and stdout: in scripts use `expiryctl dlq summary`, `dlq list` and `replay list`")
	}
	rec, err := opts.Recorder(ctx)
	if err != nil {
		return err
	}
	// The session is audited once here; the summary and list refresh on a
	// timer and are not, while opening a letter's payload always is.
	if err := rec.Record(ctx, audit.Entry{Action: "tui.open",
		Details: map[string]any{"refresh": opts.Refresh.String()}}); err != nil {
		return err
	}
	svc, err := opts.Services(ctx)
	if err != nil {
		return err
	}
	if opts.WorkQueue != "" {
		svc.WorkQueue = opts.WorkQueue
	}
	r := lipgloss.NewRenderer(opts.IO.Out)
	if !opts.IO.Color {
		r.SetColorProfile(termenv.Ascii)
	}
	m := tui.New(svc, tui.WithRenderer(r), tui.WithRefresh(opts.Refresh), tui.WithNotes(opts.IO.ErrOut))
	return tui.Run(ctx, m, opts.IO.In, opts.IO.Out)
}
