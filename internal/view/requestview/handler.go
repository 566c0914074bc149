package requestview

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// handlerFields writes the handler check: which versions failed the
// cohort, what consumes its targets now, and what a run would make of it.
func handlerFields(d replay.Detail, st Styles, field func(name, value string)) {
	failed := replay.FailedUnderText(d.FailedUnder)
	if len(d.FailedUnder) == 0 {
		failed = "not recorded (requested before expiryctl froze handler versions)"
	}
	field("failed under", failed)
	h := d.Handler
	switch {
	case h == nil:
		field("consumed now by", "not read")
	case h.ConsumedNow == nil:
		field("consumed now by", "not read (the request is no longer open)")
	case h.ConsumedNow.Unavailable != "":
		field("consumed now by", st.Warn("unknown: "+termsafe.EscapeLine(h.ConsumedNow.Unavailable)))
	case len(h.ConsumedNow.Queues) == 0:
		field("consumed now by", st.Warn("nothing: the targets route to no queue"))
	default:
		for i, q := range h.ConsumedNow.Queues {
			name := ""
			if i == 0 {
				name = "consumed now by"
			}
			who := "no consumer"
			if len(q.Consumers) > 0 {
				who = replay.ConsumerVersions(q.Consumers)
			}
			field(name, fmt.Sprintf("queue %s: %s", termsafe.EscapeLine(q.Queue), termsafe.EscapeLine(who)))
		}
	}
	switch {
	case d.SameHandlerOK:
		field("handler check", st.Warn("SKIPPED (--same-handler-ok): "+termsafe.EscapeLine(d.SameHandlerWhy)))
	case h == nil || h.ConsumedNow == nil:
	case h.Condition != "":
		field("handler check", st.Warn(fmt.Sprintf("a run would be refused or halt (%s): %s", h.Condition, termsafe.EscapeLine(h.Reason))))
	default:
		field("handler check", handlerPasses(d.FailedUnder, h.ConsumedNow.Queues, st))
	}
}

// handlerPasses is the handler check's line when it passes. The rule
// judges the target queues together (one consumer on a new version
// anywhere is enough), so the line names any queue that alone would not
// pass: a copy routed there waits unhandled or meets the old handler, and
// the approver should not read "every queue" while the list above shows
// one with no consumer.
func handlerPasses(failedUnder []replay.VersionCount, queues []replay.QueueConsumers, st Styles) string {
	failed := map[string]bool{}
	for _, v := range failedUnder {
		failed[v.Version] = true
	}
	var none, old []string
	for _, q := range queues {
		switch {
		case len(q.Consumers) == 0:
			none = append(none, termsafe.EscapeLine(q.Queue))
		case !slices.ContainsFunc(q.Consumers, func(c replay.Consumer) bool { return c.HandlerVersion != "" && !failed[c.HandlerVersion] }):
			old = append(old, termsafe.EscapeLine(q.Queue))
		}
	}
	if len(none) == 0 && len(old) == 0 {
		return "passes: every target queue has a consumer on a version the cohort did not fail under"
	}
	var gaps []string
	if len(none) > 0 {
		gaps = append(gaps, fmt.Sprintf("%s %s %s no consumer, so the copies routed there wait unhandled",
			queueWord(len(none)), strings.Join(none, ", "), hasHave(len(none))))
	}
	if len(old) > 0 {
		gaps = append(gaps, fmt.Sprintf("%s %s %s only consumers on a version the cohort failed under or advertising none",
			queueWord(len(old)), strings.Join(old, ", "), hasHave(len(old))))
	}
	return st.Warn("passes, as the rule judges the target queues together: some consumer runs a version the cohort did not fail under; but " +
		strings.Join(gaps, ", and "))
}

func queueWord(n int) string {
	if n == 1 {
		return "queue"
	}
	return "queues"
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// targetFields says where the letters go: back to the queue each failed
// in (a job store's jobs retried where they are, with no exchange in
// between), or, with --via-exchange, through the original exchange to every
// queue bound there, which it lists as the broker routes them now.
func targetFields(d replay.Detail, st Styles, field func(name, value string)) {
	switch {
	case d.RetriesInPlace:
		field("publishes to", "nothing: each failed job is retried where it is, as the queue system's own retry does; no copy is sent")
	case d.ViaExchange:
		field("publishes to", st.Warn("THROUGH THE ORIGINAL EXCHANGE (--via-exchange): every queue bound there gets a copy"))
	case d.System() == deadletter.DefaultSystem:
		field("publishes to", "the queue each letter failed in, through the default exchange: no other queue gets a copy")
	default:
		field("publishes to", "the queue each letter came from (or the one the request names): no other queue gets a copy")
	}
	for _, t := range d.Targets {
		target := t.String()
		if t.Connection != "" {
			target += " (connection " + strconv.Quote(t.Connection) + ")"
		}
		field("", fmt.Sprintf("%s: %s", termsafe.EscapeLine(target), phrase.Count(t.Letters, "letter", "letters")))
	}
	if !d.ViaExchange {
		return
	}
	h := d.Handler
	switch {
	case h == nil || h.ConsumedNow == nil:
		field("copies to", "not read")
	case h.ConsumedNow.Unavailable != "":
		field("copies to", st.Warn("unknown: the broker's bindings could not be read"))
	case len(h.ConsumedNow.Queues) == 0:
		field("copies to", st.Warn("no queue: the exchange routes them nowhere"))
	default:
		queues := make([]string, 0, len(h.ConsumedNow.Queues))
		for _, q := range h.ConsumedNow.Queues {
			queues = append(queues, termsafe.EscapeLine(q.Queue))
		}
		field("copies to", st.Warn(fmt.Sprintf("%s, one copy each: %s",
			phrase.Count(len(queues), "queue", "queues"), strings.Join(queues, ", "))))
	}
}

// watchField says whether the run sees its jobs die again: it captures
// the dead-letter queues its cohort came from, unless the request said
// --unwatched.
func watchField(d replay.Detail, st Styles, field func(name, value string)) {
	if d.UnwatchedWhy != "" {
		field("dead letters back", st.Warn("UNWATCHED (--unwatched): "+termsafe.EscapeLine(d.UnwatchedWhy)+
			"; the run does not capture its dead-letter queues, so it sees jobs die again only if another capture runs"))
		return
	}
	field("dead letters back", "captured by the run from its cohort's dead-letter queues, and stopped on, until its canary window after the last publish")
}

// timeFields says when the letters may go: the cohort's deadlines, past
// and to come, the Retry-After their errors carried, the request's
// --not-before, and what a run would hold back now.
func timeFields(d replay.Detail, st Styles, field func(name, value string)) {
	const stamp = "2006-01-02T15:04:05Z"
	if d.NotBefore != nil {
		field("not before", st.Warn(d.NotBefore.UTC().Format(stamp)+" (--not-before): the run publishes nothing before it"))
	}
	t := d.Timing
	if t == nil {
		return
	}
	due := fmt.Sprintf("%d past due, %d not yet due", t.PastDue, t.NotYetDue)
	if t.NoDueAt > 0 {
		due += fmt.Sprintf(", %d name no deadline", t.NoDueAt)
	}
	if t.DueFrom != nil && t.DueTo != nil {
		due += fmt.Sprintf(" (deadlines %s to %s)", t.DueFrom.UTC().Format(stamp), t.DueTo.UTC().Format(stamp))
	}
	field("due", due)
	if t.NotYetDue > 0 {
		if d.IncludeNotDue {
			field("", st.Warn(fmt.Sprintf("INCLUDED (--include-not-due): %s not yet due go out without waiting",
				phrase.Count(t.NotYetDue, "letter", "letters"))))
		} else {
			field("", fmt.Sprintf("%s not yet due wait for their deadline", phrase.Count(t.NotYetDue, "letter", "letters")))
		}
	}
	if t.RetryAfter > 0 && t.RetryAfterUntil != nil {
		line := fmt.Sprintf("%s asked to be left alone until as late as %s", phrase.Count(t.RetryAfter, "letter", "letters"),
			t.RetryAfterUntil.UTC().Format(stamp))
		if d.IncludeNotDue {
			line = st.Warn(line + ": published without waiting (--include-not-due)")
		}
		field("retry-after", line)
	}
	if t.Held > 0 && t.HeldUntil != nil {
		field("held back", fmt.Sprintf("%s wait now, the last until %s", phrase.Count(t.Held, "item", "items"), t.HeldUntil.UTC().Format(stamp)))
	}
}

// permanentLine says how many letters of the cohort failed for good.
func permanentLine(d replay.Detail, st Styles) string {
	if d.Kind == replay.KindDiscard {
		return phrase.Count(d.PermanentCount, "letter", "letters") + " failed for good: this discard marks " +
			pronoun(d.PermanentCount) + " never to be retried"
	}
	return st.Warn("INCLUDED (--include-permanent): " + phrase.Count(d.PermanentCount, "letter", "letters") +
		" failed for good (conflict, validation, malformed, not-found); a retry is likely to fail the same way")
}

// pronoun is "it" for one letter and "them" for any other count.
func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// writePermanent lists the letters that failed for good apart, with their
// category and error.
func writePermanent(b *strings.Builder, d replay.Detail, st Styles) {
	if len(d.Permanent) == 0 {
		return
	}
	title := fmt.Sprintf("Failed for good (%d letters):", d.PermanentCount)
	if d.PermanentCount > len(d.Permanent) {
		title = fmt.Sprintf("Failed for good (%d letters, the first %d):", d.PermanentCount, len(d.Permanent))
	}
	fmt.Fprintf(b, "\n%s\n", st.Warn(title))
	for _, l := range d.Permanent {
		fmt.Fprintf(b, "  dead letter %d  %-11s  %s  %s\n", l.DeadLetterID, l.Category, termsafe.EscapeLine(orDash(l.ErrorClass)),
			termsafe.EscapeLine(orDash(l.LastError)))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
