// Package letterview renders one dead letter for a person at a terminal: the
// view `expiryctl dlq show` prints and the terminal UI's detail screen shows.
// Every value taken from the message passes through termsafe, so nothing in
// it can drive the terminal.
package letterview

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
)

// Styles decorate the view; each joins and styles its text, as a lipgloss
// Style's Render does. The zero value leaves text plain.
type Styles struct {
	Title   func(...string) string
	Section func(...string) string
	Warn    func(...string) string
}

// Options tune the view.
type Options struct {
	// Now is the time ages are counted from ("2h3m ago").
	Now time.Time
	// PayloadLimit is the most payload bytes shown; 0 shows all.
	PayloadLimit int
	// TruncatedHint follows a cut payload; it is given the bytes shown and
	// the payload's size, and says how to see the rest.
	TruncatedHint func(shown, size int) string
	// Width, when above 0, wraps a line wider than it at spaces, its next
	// lines under its value, rather than leave the terminal to break it at
	// the last column, mid-word. The payload is not wrapped: it is shown as
	// it was sent.
	Width int
	// Systems say how each queue system reads and whether its letters
	// are retried in place, from the drivers; a system they do not
	// describe reads as its name.
	Systems deadletter.Systems
}

// Render returns the view of d: identity, why it died, where a replay sends
// it, the attempt timeline, x-death decoded, headers, the payload (pretty
// JSON, escaped text or a hex dump) and the other incarnations of the job.
func Render(d deadletter.Detail, st Styles, opts Options) string {
	st = st.withDefaults()
	var b strings.Builder
	esc := termsafe.EscapeLine
	wrap := opts.wrapper()
	section := func(title string) {
		// Styled line by line: a style given lines pads them to one width.
		lines := strings.Split(wrap(title, 0), "\n")
		for i, l := range lines {
			lines[i] = st.Section(l)
		}
		fmt.Fprintf(&b, "\n%s\n", strings.Join(lines, "\n"))
	}
	field := func(name, value string) {
		if value != "" {
			b.WriteString(wrap(fmt.Sprintf("  %-17s %s", name, value), 20) + "\n")
		}
	}

	fmt.Fprintf(&b, "%s\n", st.Title(fmt.Sprintf("Dead letter %d — %s, %s", d.ID, d.Category, d.Status)))
	field("message id", esc(d.MessageID))
	field("reservation", esc(d.ReservationID))
	if d.ExpectedVersion != nil {
		field("expected version", strconv.FormatInt(*d.ExpectedVersion, 10))
	}
	field("idempotency key", esc(d.IdempotencyKey))
	if d.DueAt != nil {
		field("due at", d.DueAt.UTC().Format(time.RFC3339)+" ("+relative(opts.Now, *d.DueAt)+")")
	}
	field("error class", esc(d.ErrorClass))
	field("last error", esc(d.LastError))
	if d.PayloadProblem != "" {
		field("unreadable body", st.Warn(esc(d.PayloadProblem)))
	}
	field("attempts", strconv.Itoa(d.Attempts)+attemptsSource(d, opts.Systems.Named(d.System)))
	field("dead-lettered", d.DeadLetteredAt.UTC().Format(time.RFC3339)+" ("+relative(opts.Now, d.DeadLetteredAt)+")")
	field("ingested", d.IngestedAt.UTC().Format(time.RFC3339))
	system := opts.Systems.Named(d.System)
	field("captured from", esc(d.SourceQueue)+" ("+esc(system.Title)+")")
	switch {
	case system.RetriesInPlace:
		field("replays to", "the job itself, retried in place ("+esc(system.Title)+" job "+esc(d.Native[deadletter.NativeJobID])+")")
	case !system.Routes && d.OriginQueue != "":
		field("replays to", "queue "+termsafe.Quote(d.OriginQueue))
	case !system.Routes:
		field("replays to", st.Warn("unknown: "+esc(cmp.Or(system.NoOrigin, "the letter names no queue it came from; a replay request must name one (--routing-key)"))))
	case d.OriginalExchange != "" || d.OriginalRoutingKey != "":
		field("replays to", "exchange "+termsafe.Quote(d.OriginalExchange)+", routing key "+termsafe.Quote(d.OriginalRoutingKey))
	case d.OriginQueue != "":
		field("replays to", "queue "+termsafe.Quote(d.OriginQueue)+" (from x-death; no origin headers)")
	default:
		field("replays to", st.Warn("unknown: a replay request must name a target exchange and routing key"))
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
		if ev.Attempt > 0 {
			what = strings.TrimSpace(fmt.Sprintf("attempt %d %s", ev.Attempt, what))
		}
		line := fmt.Sprintf("  %-20s  %-6s  %s", timeOrUnknown(ev.At), esc(ev.Source), what)
		if ev.Error != "" {
			line += "  " + esc(ev.Error)
		}
		b.WriteString(wrap(line, 8) + "\n")
		// A trace is many lines; each is indented under its attempt, and
		// escaped, since a job's trace is whatever its worker threw.
		for _, tl := range strings.Split(strings.TrimRight(ev.Trace, "\n"), "\n") {
			if tl != "" {
				b.WriteString("        " + esc(tl) + "\n")
			}
		}
	}

	if len(d.Deaths) > 0 {
		section("x-death (newest first, as " + esc(system.Title) + " keeps it)")
		for i, death := range d.Deaths {
			keys := make([]string, len(death.RoutingKeys))
			for j, k := range death.RoutingKeys {
				keys[j] = esc(k)
			}
			b.WriteString(wrap(fmt.Sprintf("  #%d  reason=%s count=%d queue=%s exchange=%s routing-keys=[%s] time=%s", i+1,
				esc(death.Reason), death.Count, esc(death.Queue), esc(death.Exchange), strings.Join(keys, ","),
				timeOrUnknown(death.Time)), 6) + "\n")
		}
	}

	if system.Routes {
		section("Properties")
		writeProperties(&b, d.Properties, wrap)
	} else {
		section(esc(system.Title) + nativeTitle(system))
		writeNative(&b, d.Native)
	}

	section("Headers")
	writeHeaders(&b, d.Headers, len(d.Deaths) > 0, wrap)

	ct := esc(d.ContentType)
	if ct == "" {
		ct = "-"
	}
	section(fmt.Sprintf("Payload (%s, %d bytes, sha256 %s)", ct, d.PayloadSize, d.PayloadSHA256))
	writePayload(&b, st, opts, d.Payload)

	section("Other incarnations of this job")
	if len(d.Incarnations) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, r := range d.Incarnations {
		rel := "later"
		if r.ID < d.ID {
			rel = "earlier"
		}
		b.WriteString(wrap(fmt.Sprintf("  %-7s #%d  %s  %s  %s  %s", rel, r.ID, r.DeadLetteredAt.UTC().Format(time.RFC3339),
			r.Category, r.Status, esc(r.ErrorClass)), 12) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// wrapper returns how a line of the view is wrapped: at spaces, its next
// lines from column indent on, when o has a width; not at all otherwise.
func (o Options) wrapper() func(line string, indent int) string {
	if o.Width <= 0 {
		return func(line string, _ int) string { return line }
	}
	return func(line string, indent int) string { return linewrap.Hanging(line, o.Width, indent) }
}

func (st Styles) withDefaults() Styles {
	plain := func(s ...string) string { return strings.Join(s, " ") }
	if st.Title == nil {
		st.Title = plain
	}
	if st.Section == nil {
		st.Section = plain
	}
	if st.Warn == nil {
		st.Warn = plain
	}
	return st
}

// attemptsSource says where a letter's attempts were counted from when the
// number would mislead otherwise: a quorum queue that dead-letters at its
// delivery limit writes an x-death entry per death, and RabbitMQ 3.10
// writes no x-delivery-count, so the count is of deaths while each death
// followed the queue's x-delivery-limit + 1 deliveries, a limit the letter
// does not carry. SQS's delivery_limit count is the receive count, the
// deliveries themselves, and needs no note.
func attemptsSource(d deadletter.Detail, system deadletter.SystemInfo) string {
	if !system.Routes {
		return ""
	}
	var limitDeaths, counted int64
	for _, death := range d.Deaths {
		switch death.Reason {
		case "delivery_limit":
			limitDeaths += max(death.Count, 0)
			counted += max(death.Count, 0)
		case "rejected":
			counted += max(death.Count, 0)
		}
	}
	if limitDeaths == 0 || counted != int64(d.Attempts) {
		return ""
	}
	if headers, err := deadletter.DecodeHeaders(d.Headers); err == nil {
		if _, ok := headers["x-delivery-count"]; ok {
			return ""
		}
	}
	return fmt.Sprintf(" (%s in x-death; %s recorded no x-delivery-count, and each such death follows the queue's x-delivery-limit + 1 deliveries)",
		phrase.Count(limitDeaths, "delivery_limit death", "delivery_limit deaths"), system.Title)
}

// timeOrUnknown formats t, or says "unknown" for the zero time, which is how
// a letter records a time its message did not give.
func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func relative(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + phrase.Approximate(-d)
	}
	return phrase.Approximate(d) + " ago"
}

// QueueLabel names a queue letters were captured from in the width a
// table cell has: an SQS queue as "SQS" and its name, the end of an ARN
// that a column would otherwise cut before it; the queue of a system whose
// queue names carry their connection as its system and the queue or
// table, the end of a name that begins with the connection; a RabbitMQ
// queue by its name. Escaped for the terminal.
func QueueLabel(queue string, systems deadletter.Systems) string {
	s := systems.Of(queue)
	switch {
	case s.QueuePrefix != "" && s.NamesConnectionInQueue:
		return termsafe.EscapeLine(s.Title) + " " + termsafe.EscapeLine(queue[strings.LastIndexByte(queue, '/')+1:])
	case s.QueuePrefix != "":
		// A resource name (an ARN): its last part names the queue.
		return termsafe.EscapeLine(s.Title) + " " + termsafe.EscapeLine(queue[strings.LastIndexByte(queue, ':')+1:])
	}
	return termsafe.EscapeLine(queue)
}

// nativeTitle names the section of a system's own fields.
func nativeTitle(s deadletter.SystemInfo) string {
	if s.RetriesInPlace {
		return " job, as its store keeps it"
	}
	return " system attributes"
}

// writeNative lists a system's own attributes of a message, sorted.
func writeNative(b *strings.Builder, native map[string]string) {
	if len(native) == 0 {
		b.WriteString("  (none)\n")
		return
	}
	for _, k := range slices.Sorted(maps.Keys(native)) {
		fmt.Fprintf(b, "  %s: %s\n", termsafe.EscapeLine(k), termsafe.EscapeLine(native[k]))
	}
}

func writeProperties(b *strings.Builder, p *deadletter.Properties, wrap func(string, int) string) {
	if p == nil {
		b.WriteString(wrap("  (not recorded: captured before expiryctl kept them; a replay sends content type, message id and persistent delivery only)", 3) + "\n")
		return
	}
	lines := PropertyLines(*p)
	if len(lines) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, l := range lines {
		b.WriteString(wrap("  "+l.Key+": "+l.Value, 4) + "\n")
	}
}

func writeHeaders(b *strings.Builder, raw json.RawMessage, decodedDeaths bool, wrap func(string, int) string) {
	lines, err := HeaderLines(raw)
	if err != nil || len(lines) == 0 {
		b.WriteString("  (none)\n")
		return
	}
	for _, h := range lines {
		if h.Key == "x-death" && decodedDeaths {
			fmt.Fprintf(b, "  %s: (decoded above)\n", h.Key)
			continue
		}
		b.WriteString(wrap("  "+h.Key+": "+h.Value, 4) + "\n")
	}
}

func writePayload(b *strings.Builder, st Styles, opts Options, payload []byte) {
	if len(payload) == 0 {
		b.WriteString("  (empty)\n")
		return
	}
	limit := opts.PayloadLimit
	shown, truncated := payload, false
	if limit > 0 && len(shown) > limit {
		shown, truncated = shown[:limit], true
	}
	var text string
	switch {
	case termsafe.IsText(payload) && json.Valid(payload):
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, payload, "  ", "  ")
		text = strings.TrimRight(pretty.String(), " \t\r\n")
		if limit > 0 && len(text) > limit {
			// Cut on a rune boundary, so that the cut does not show as
			// a stray \xHH the payload never held.
			cut := limit
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text, truncated = text[:cut], true
		}
		// JSON, not Escape: the payload shown is the JSON that was sent,
		// its backslashes not doubled.
		text = "  " + termsafe.JSON(text)
	case termsafe.IsText(shown):
		text = "  " + strings.ReplaceAll(termsafe.Escape(string(shown)), "\n", "\n  ")
	default:
		// hex.Dump shows bytes outside printable ASCII as '.': its
		// output is safe on a terminal as it is.
		text = "  " + strings.ReplaceAll(strings.TrimRight(hex.Dump(shown), "\n"), "\n", "\n  ")
	}
	// Tabs are kept by Escape; expand them so that widths stay exact.
	text = strings.ReplaceAll(text, "\t", "    ")
	b.WriteString(strings.TrimRight(text, "\n") + "\n")
	if truncated && opts.TruncatedHint != nil {
		b.WriteString(st.Warn(opts.TruncatedHint(limit, len(payload))) + "\n")
	}
}
