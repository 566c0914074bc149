package detail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/termsafe"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// PayloadLimit is the payload bytes shown; `dlq show --payload-limit 0` or
// --save-payload give the rest.
const PayloadLimit = 16 << 10

// Render returns the detail view of d as lines, the way `dlq show` shows a
// letter: identity, why it died, the timeline, x-death decoded, headers,
// payload (pretty JSON, escaped text or a hex dump) and the other
// incarnations. Every value taken from the message passes through
// termsafe, so nothing in it can drive the terminal.
func Render(th *frame.Theme, d deadletter.Detail, now time.Time) string {
	var b strings.Builder
	esc := termsafe.EscapeLine
	section := func(title string) { fmt.Fprintf(&b, "\n%s\n", th.Header.Render(title)) }
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-17s %s\n", name, value)
		}
	}

	fmt.Fprintf(&b, "%s\n", th.Title.Render(fmt.Sprintf("Dead letter %d — %s, %s", d.ID, d.Category, d.Status)))
	field("message id", esc(d.MessageID))
	field("reservation", esc(d.ReservationID))
	if d.ExpectedVersion != nil {
		field("expected version", strconv.FormatInt(*d.ExpectedVersion, 10))
	}
	field("idempotency key", esc(d.IdempotencyKey))
	if d.DueAt != nil {
		field("due at", d.DueAt.UTC().Format(time.RFC3339)+" ("+relative(now, *d.DueAt)+")")
	}
	field("error class", esc(d.ErrorClass))
	field("last error", esc(d.LastError))
	field("attempts", strconv.Itoa(d.Attempts))
	field("dead-lettered", d.DeadLetteredAt.UTC().Format(time.RFC3339)+" ("+relative(now, d.DeadLetteredAt)+")")
	field("ingested", d.IngestedAt.UTC().Format(time.RFC3339))
	field("captured from", esc(d.SourceQueue))
	switch {
	case d.OriginalExchange != "" || d.OriginalRoutingKey != "":
		field("replays to", fmt.Sprintf("exchange %q, routing key %q", esc(d.OriginalExchange), esc(d.OriginalRoutingKey)))
	case d.OriginQueue != "":
		field("replays to", fmt.Sprintf("queue %q (from x-death; no origin headers)", esc(d.OriginQueue)))
	default:
		field("replays to", th.Warn.Render("unknown: a replay request must name a target exchange and routing key"))
	}
	if d.ReplayRequestID != nil {
		field("request", fmt.Sprintf("replay request %d (replay #%d)", *d.ReplayRequestID, d.ReplayCount))
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
		line := fmt.Sprintf("  %s  %-6s  %s", ev.At.UTC().Format(time.RFC3339), esc(ev.Source), what)
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

	ct := esc(d.ContentType)
	if ct == "" {
		ct = "-"
	}
	section(fmt.Sprintf("Payload (%s, %d bytes, sha256 %s)", ct, d.PayloadSize, d.PayloadSHA256))
	writePayload(&b, th, d.Payload)

	section("Other incarnations of this job")
	if len(d.Incarnations) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, r := range d.Incarnations {
		rel := "later"
		if r.ID < d.ID {
			rel = "earlier"
		}
		fmt.Fprintf(&b, "  %-7s #%d  %s  %s  %s  %s\n", rel, r.ID, r.DeadLetteredAt.UTC().Format(time.RFC3339),
			r.Category, r.Status, esc(r.ErrorClass))
	}
	return strings.TrimRight(b.String(), "\n")
}

func relative(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + (-d).Round(time.Second).String()
	}
	return d.Round(time.Second).String() + " ago"
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

func writePayload(b *strings.Builder, th *frame.Theme, payload []byte) {
	if len(payload) == 0 {
		b.WriteString("  (empty)\n")
		return
	}
	shown, truncated := payload, false
	if len(shown) > PayloadLimit {
		shown, truncated = shown[:PayloadLimit], true
	}
	var text string
	switch {
	case termsafe.IsText(payload) && json.Valid(payload):
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, payload, "  ", "  ")
		text = pretty.String()
		if len(text) > PayloadLimit {
			text, truncated = text[:PayloadLimit], true
		}
		text = "  " + termsafe.Escape(text)
	case termsafe.IsText(shown):
		text = "  " + strings.ReplaceAll(termsafe.Escape(string(shown)), "\n", "\n  ")
	default:
		dump, _ := termsafe.HexDump(shown, len(shown))
		text = "  " + strings.ReplaceAll(strings.TrimRight(dump, "\n"), "\n", "\n  ")
	}
	// Tabs are kept by Escape; expand them so that widths stay exact.
	text = strings.ReplaceAll(text, "\t", "    ")
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
	if truncated {
		b.WriteString(th.Warn.Render(fmt.Sprintf("  … showing %d of %d bytes: `expiryctl dlq show ID --save-payload FILE` saves the exact bytes", PayloadLimit, len(payload))) + "\n")
	}
}
