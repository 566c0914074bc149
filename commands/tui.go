package commands

import (
	"context"
	"os"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mattn/go-isatty"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui"
)

// TUIOptions holds what `expiryctl tui` needs.
type TUIOptions struct {
	IO    *IOStreams
	Actor func() string
	DB    func(context.Context) (*pgxpool.Pool, error)
	Now   func() time.Time
	// NewRunner and NewAudit build the adapters the run and audit screens
	// call over the same pool and actor as the other services; nil leaves
	// those screens saying how to do it from a shell instead.
	NewRunner func(pool *pgxpool.Pool, actor string) tui.Runner
	NewAudit  func(pool *pgxpool.Pool, actor string) tui.AuditTrail

	Refresh time.Duration
}

// NewCmdTUI builds `expiryctl tui`.
func NewCmdTUI(f *Factory, runF func(context.Context, *TUIOptions) error) *cobra.Command {
	opts := &TUIOptions{IO: f.IO, Actor: f.Actor, DB: f.DB, Now: f.Now,
		NewRunner: func(pool *pgxpool.Pool, actor string) tui.Runner {
			return &tuiRunner{pool: pool, actor: actor, amqp: f.AMQP}
		},
		NewAudit: func(pool *pgxpool.Pool, actor string) tui.AuditTrail { return &tuiAudit{pool: pool, actor: actor} },
	}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "Triage and review in a terminal UI",
		Long: `Open the terminal UI: the summary by reason (refreshed live), the letter
list paged from the archive, a letter's detail, replay and discard requests
with approval, running an approved request, and the audit trail.

It calls the same services as the other commands, under the same rules: a
request still needs a different approver, every view is audited, and every
text taken from a message is shown escaped. Press ? for the keys, q to quit.
NO_COLOR turns colours and attributes off.`,
		Example: `  expiryctl tui
  expiryctl --actor bob tui          # review as bob in a second terminal
  NO_COLOR=1 expiryctl tui --refresh 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Refresh < 0 {
				return flagErrorf("invalid --refresh %s: use a positive duration, e.g. 2s, or 0 to refresh only on keys", opts.Refresh)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return tuiRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", tui.DefaultRefresh, "how often the summary reloads and failed calls are retried")
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
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	actor := opts.Actor()
	// The session is audited once here; the summary and list refresh on a
	// timer and are not, while opening a letter's payload always is.
	if err := audit.Record(ctx, pool, audit.Entry{Actor: actor, Action: "tui.open",
		Details: map[string]any{"refresh": opts.Refresh.String()}}); err != nil {
		return err
	}
	svc := tui.Services{
		Archive:  deadletter.NewArchive(pool, actor).WithoutListingAudit(),
		Requests: &replay.Service{Pool: pool, Actor: actor, Now: opts.Now},
		Policy:   func(ctx context.Context) (replay.Policy, error) { return replay.LoadPolicy(ctx, pool) },
		Actor:    actor,
		Now:      opts.Now,
	}
	if opts.NewRunner != nil {
		svc.Runner = opts.NewRunner(pool, actor)
	}
	if opts.NewAudit != nil {
		svc.Audit = opts.NewAudit(pool, actor)
	}
	r := lipgloss.NewRenderer(opts.IO.Out)
	if !opts.IO.Color {
		r.SetColorProfile(termenv.Ascii)
	}
	m := tui.New(svc, tui.WithRenderer(r), tui.WithRefresh(opts.Refresh))
	return tui.Run(ctx, m, opts.IO.In, opts.IO.Out)
}
