package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/termsafe"
)

// DLQShowOptions holds what `expiryctl dlq show` needs.
type DLQShowOptions struct {
	IO    *IOStreams
	Actor func() string
	DB    func(context.Context) (*pgxpool.Pool, error)
	Now   func() time.Time

	ID           int64
	PayloadLimit int
	SavePayload  string
	Output       *outputFormat
}

// NewCmdDLQShow builds `expiryctl dlq show`.
func NewCmdDLQShow(f *Factory, runF func(context.Context, *DLQShowOptions) error) *cobra.Command {
	opts := &DLQShowOptions{IO: f.IO, Actor: f.Actor, DB: f.DB, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show everything about one dead letter",
		Long: `Show one dead letter: identity, why it died, its attempt timeline, RabbitMQ's
x-death decoded, its headers, its payload, and its other incarnations (the
same job dead-lettered before or after).

Payloads are pretty-printed when they are JSON and hex-dumped when binary.
Every control character and terminal escape sequence is shown escaped
(\x1b, \u009b, …), so a hostile message cannot drive your terminal. Use
--save-payload to get the exact bytes. Viewing a payload is audited.`,
		Example: `  expiryctl dlq show 42
  expiryctl dlq show 42 --payload-limit 0
  expiryctl dlq show 42 --save-payload /tmp/letter-42.bin
  expiryctl dlq show 42 -o json | jq .attempt_history`,
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
	return cmd
}

func dlqShowRun(ctx context.Context, opts *DLQShowOptions) error {
	pool, err := opts.DB(ctx)
	if err != nil {
		return err
	}
	d, err := deadletter.NewArchive(pool, opts.Actor()).Show(ctx, opts.ID)
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
	return renderDetail(opts.IO.Out, styles(opts.IO), d, opts.PayloadLimit, opts.Now())
}

// renderDetail writes the human view of a dead letter. Everything taken from
// the message passes through termsafe.
func renderDetail(w io.Writer, st styleSet, d deadletter.Detail, payloadLimit int, now time.Time) error {
	var b strings.Builder
	esc := termsafe.EscapeLine
	section := func(title string) { fmt.Fprintf(&b, "\n%s\n", st.title.Render(title)) }
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-18s %s\n", name, value)
		}
	}

	fmt.Fprintf(&b, "%s\n", st.header.Render(fmt.Sprintf("Dead letter %d — %s, %s", d.ID, d.Category, d.Status)))
	field("message id", esc(d.MessageID))
	field("reservation", esc(d.ReservationID))
	if d.ExpectedVersion != nil {
		field("expected version", strconv.FormatInt(*d.ExpectedVersion, 10))
	}
	field("idempotency key", esc(d.IdempotencyKey))
	if d.DueAt != nil {
		field("due at", d.DueAt.Format(time.RFC3339)+" ("+formatAge(d.DueAt.Sub(now))+")")
	}
	field("error class", esc(d.ErrorClass))
	field("last error", esc(d.LastError))
	field("attempts", strconv.Itoa(d.Attempts))
	field("dead-lettered", d.DeadLetteredAt.Format(time.RFC3339Nano))
	field("ingested", d.IngestedAt.Format(time.RFC3339Nano))
	field("captured from", esc(d.SourceQueue))
	switch {
	case d.OriginalExchange != "" || d.OriginalRoutingKey != "":
		field("replays to", fmt.Sprintf("exchange %q, routing key %q", esc(d.OriginalExchange), esc(d.OriginalRoutingKey)))
	case d.OriginQueue != "":
		field("replays to", fmt.Sprintf("queue %q (from x-death; no origin headers)", esc(d.OriginQueue)))
	default:
		field("replays to", st.warn.Render("unknown: a replay request must name --to-exchange and --routing-key"))
	}
	if d.ReplayRequestID != nil {
		field("died after replay", fmt.Sprintf("request %d (replay #%d)", *d.ReplayRequestID, d.ReplayCount))
	}
	if d.RedactedAt != nil {
		field("redacted", d.RedactedAt.UTC().Format(time.RFC3339)+" (payload and headers removed by retention)")
	}

	section("Timeline")
	if len(d.AttemptHistory) == 0 {
		b.WriteString("  (no attempt history)\n")
	}
	for _, ev := range d.AttemptHistory {
		what := esc(ev.ErrorClass)
		if ev.Source == "broker" {
			what = fmt.Sprintf("%s ×%d in %s", esc(ev.Reason), ev.Count, esc(ev.Queue))
		}
		line := fmt.Sprintf("  %s  %-6s  %s", ev.At.UTC().Format(time.RFC3339), ev.Source, what)
		if ev.Error != "" {
			line += "  " + esc(ev.Error)
		}
		b.WriteString(line + "\n")
	}

	if len(d.Deaths) > 0 {
		section("x-death (newest first, as RabbitMQ keeps it)")
		for i, death := range d.Deaths {
			keys := make([]string, len(death.RoutingKeys))
			for j, k := range death.RoutingKeys {
				keys[j] = esc(k)
			}
			fmt.Fprintf(&b, "  #%d  reason=%s count=%d queue=%s exchange=%s routing-keys=[%s] time=%s\n", i+1,
				esc(death.Reason), death.Count, esc(death.Queue), esc(death.Exchange), strings.Join(keys, ","),
				death.Time.UTC().Format(time.RFC3339))
		}
	}

	section("Headers")
	writeHeaders(&b, d.Headers, len(d.Deaths) > 0)

	section(fmt.Sprintf("Payload (%s, %d bytes, sha256 %s)", orDash(esc(d.ContentType)), d.PayloadSize, d.PayloadSHA256))
	writePayload(&b, st, d.Payload, payloadLimit)

	if len(d.Incarnations) > 0 {
		section("Other incarnations of this job")
		for _, r := range d.Incarnations {
			rel := "later"
			if r.ID < d.ID {
				rel = "earlier"
			}
			fmt.Fprintf(&b, "  %-7s #%d  %s  %s  %s  %s\n", rel, r.ID, r.DeadLetteredAt.Format(time.RFC3339),
				r.Category, r.Status, esc(r.ErrorClass))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeaders(b *strings.Builder, raw json.RawMessage, decodedDeaths bool) {
	lines, err := deadletter.HeaderLines(raw)
	if err != nil || len(lines) == 0 {
		b.WriteString("  (none)\n")
		return
	}
	for _, h := range lines {
		if h.Key == "x-death" && decodedDeaths {
			fmt.Fprintf(b, "  %s: (decoded above)\n", h.Key)
			continue
		}
		fmt.Fprintf(b, "  %s: %s\n", h.Key, h.Value)
	}
}

func writePayload(b *strings.Builder, st styleSet, payload []byte, limit int) {
	if len(payload) == 0 {
		b.WriteString("  (empty)\n")
		return
	}
	shown := payload
	truncated := false
	if limit > 0 && len(shown) > limit {
		shown, truncated = shown[:limit], true
	}
	var text string
	switch {
	case termsafe.IsText(payload) && json.Valid(payload):
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, payload, "  ", "  ")
		text = pretty.String()
		if limit > 0 && len(text) > limit {
			text, truncated = text[:limit], true
		}
		text = "  " + termsafe.Escape(text)
	case termsafe.IsText(shown):
		text = "  " + strings.ReplaceAll(termsafe.Escape(string(shown)), "\n", "\n  ")
	default:
		dump, _ := termsafe.HexDump(shown, len(shown))
		text = "  " + strings.ReplaceAll(strings.TrimRight(dump, "\n"), "\n", "\n  ")
	}
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
	if truncated {
		b.WriteString(st.warn.Render(fmt.Sprintf("  … truncated: showing %d of %d bytes (--payload-limit 0 shows all, --save-payload FILE saves the exact bytes)", limit, len(payload))) + "\n")
	}
}

func formatAge(d time.Duration) string {
	if d < 0 {
		return (-d).Round(time.Second).String() + " ago"
	}
	return "in " + d.Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
