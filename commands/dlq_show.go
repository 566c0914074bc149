package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/registry"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/letterview"
)

// DLQShowOptions holds what `expiryctl dlq show` needs.
type DLQShowOptions struct {
	IO      *IOStreams
	Archive func(context.Context) (service.Archive, error)
	Now     func() time.Time

	ID           int64
	PayloadLimit int
	SavePayload  string
	Output       *outputFormat
	// Pager takes the view when it is taller than the terminal.
	Pager *pager
}

// NewCmdDLQShow builds `expiryctl dlq show`.
func NewCmdDLQShow(f *Factory, runF func(context.Context, *DLQShowOptions) error) *cobra.Command {
	opts := &DLQShowOptions{IO: f.IO, Archive: f.Archive, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show everything about one dead letter",
		Long: `Show one dead letter: identity, why it died, its attempt timeline, RabbitMQ's
x-death decoded, its headers, its payload, and its other incarnations (the
same job dead-lettered before or after).

Payloads are pretty-printed when they are JSON and hex-dumped when binary.
Every control character and terminal escape sequence is shown escaped
(\x1b, \u009b, …), so a hostile message cannot drive your terminal. A JSON
payload is shown as the JSON that was sent, re-indented, with such a
character written as the JSON escape of itself (\u202e). Header values are
quoted as Go quotes them, so a quote or backslash inside reads once. Use
--save-payload to get the exact bytes. Viewing a payload is audited.

On a terminal, a view taller than the screen goes through $EXPIRYCTL_PAGER,
else $PAGER, else less (with LESS=FRX unless LESS is set); an empty value or
cat, or --no-pager, writes it directly.`,
		Example: `  expiryctl dlq show 42
  expiryctl dlq show 42 --payload-limit 0
  expiryctl dlq show 42 --save-payload /tmp/letter-42.bin
  expiryctl dlq show 42 -o json | jq .attempt_history
  PAGER="less -S" expiryctl dlq show 42          # long lines scroll sideways
  expiryctl dlq show 42 --no-pager`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return flagErrorf("dlq show takes one dead-letter id, e.g. `expiryctl dlq show 42`")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return flagErrorf("invalid dead-letter id %q: use the number in the ID column of `expiryctl dlq list`", args[0])
			}
			opts.ID = id
			if opts.PayloadLimit < 0 {
				return flagErrorf("invalid --payload-limit %d: use 0 for everything or a number of bytes", opts.PayloadLimit)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqShowRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.PayloadLimit, "payload-limit", 16<<10, "bytes of payload to display; 0 shows it all")
	cmd.Flags().StringVar(&opts.SavePayload, "save-payload", "", "write the exact payload bytes to this file")
	opts.Output = addOutputFlag(cmd, "table", "json")
	opts.Pager = addPagerFlag(cmd, f)
	return cmd
}

func dlqShowRun(ctx context.Context, opts *DLQShowOptions) error {
	archive, err := opts.Archive(ctx)
	if err != nil {
		return err
	}
	d, err := archive.Show(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.SavePayload != "" {
		if err := os.WriteFile(opts.SavePayload, d.Payload, 0o600); err != nil {
			return fmt.Errorf("save payload: %w", err)
		}
		fmt.Fprintf(opts.IO.ErrOut, "wrote %d payload bytes to %s\n", len(d.Payload), opts.SavePayload)
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, d)
	}
	return opts.Pager.show(opts.IO, func(streams *IOStreams) error {
		// On a terminal the view wraps its lines at spaces itself, so
		// that the terminal does not break a word at its last column.
		width, _, ok := streams.terminal()
		if !ok {
			width = 0
		}
		return renderDetail(streams.Out, styles(streams), d, opts.PayloadLimit, opts.Now(), width)
	})
}

// renderDetail writes the human view of a dead letter (see letterview),
// wrapped to width when it is above 0.
func renderDetail(w io.Writer, st styleSet, d deadletter.Detail, payloadLimit int, now time.Time, width int) error {
	view := letterview.Render(d, letterview.Styles{Title: st.header.Render, Section: st.title.Render, Warn: st.warn.Render},
		letterview.Options{Now: now, PayloadLimit: payloadLimit, Width: width, Systems: registry.Systems(), TruncatedHint: func(shown, size int) string {
			return fmt.Sprintf("  … truncated: showing %d of %d bytes (--payload-limit 0 shows all, --save-payload FILE saves the exact bytes)", shown, size)
		}})
	_, err := io.WriteString(w, view+"\n")
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
