// Package requestview renders a replay or discard request for the person
// who reviews it: the view `expiryctl replay show` prints and the terminal
// UI's requests screen shows. Text from people and letters is escaped.
package requestview

import (
	"fmt"
	"sort"
	"strings"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// Styles decorate the view; each joins and styles its text, as a lipgloss
// Style's Render does. The zero value leaves text plain.
type Styles struct {
	Title func(...string) string
	Warn  func(...string) string
}

// Render returns what an approver approves (and, while it runs, whether a
// runner holds it), without the sample of items
// (callers lay that out their own way): who asked and why, the review, the
// cohort and its hash, the selection as written, categories, rate, canary,
// stop conditions, target, the idempotency-key flag, the handler check
// (the versions the cohort failed under beside what consumes its targets
// now, and --same-handler-ok), item states, a halt reason, any letter
// changed since the cohort was frozen, and the letters that failed for
// good, listed apart.
// freshKeyHint says how this interface lets an approver allow a fresh key.
func Render(d replay.Detail, st Styles, freshKeyHint string) string {
	st = st.withDefaults()
	var b strings.Builder
	esc := termsafe.EscapeLine
	const stamp = "2006-01-02T15:04:05Z"
	field := func(name, value string) { fmt.Fprintf(&b, "  %-20s %s\n", name, value) }
	fmt.Fprintf(&b, "%s\n", st.Title(fmt.Sprintf("Replay request %d — %s %s", d.ID, d.Kind, StatusLabel(d.Request))))
	if line := runnerLine(d.Request, st); line != "" {
		field("runner", line)
	}
	field("requested by", fmt.Sprintf("%s (database role %s) at %s", esc(d.RequestedBy), esc(d.RequestedDBRole), d.CreatedAt.UTC().Format(stamp)))
	field("why", esc(d.Why))
	field("review by", d.ExpiresAt.UTC().Format(stamp))
	if d.ReviewedBy != "" {
		field("reviewed by", fmt.Sprintf("%s (database role %s): %s", esc(d.ReviewedBy), esc(d.ReviewedDBRole), esc(d.ReviewWhy)))
	}
	if d.ApprovalExpiresAt != nil && d.Status == replay.StatusApproved {
		field("approval valid until", d.ApprovalExpiresAt.UTC().Format(stamp))
	}
	field("cohort", fmt.Sprintf("%s, hash %s", phrase.Count(d.Items, "letter", "letters"), d.CohortHash))
	field("selection", esc(string(d.Filter)))
	field("categories", counts(d.Categories))
	if d.Kind == replay.KindReplay {
		field("rate", fmt.Sprintf("at most %g/s", d.Rate))
		field("canary", canaryText(d))
		field("stop when", fmt.Sprintf("publish failures > %g%%, target queue > %d messages, re-dead-lettered > %g%%",
			d.Stop.FailureRatio*100, d.Stop.QueueDepth, d.Stop.RedeadRatio*100))
		targetFields(d, st, field)
		timeFields(d, st, field)
		watchField(d, st, field)
		switch {
		case d.ToExchange == "" && d.ToRoutingKey != "":
			field("fallback target", "queue "+termsafe.Quote(d.ToRoutingKey)+" (for letters that name no queue)")
		case d.ToExchange != "":
			field("fallback target", "exchange "+termsafe.Quote(d.ToExchange)+" routing key "+termsafe.Quote(d.ToRoutingKey))
		}
		keyLine := "kept: the worker recognises jobs it already did"
		if d.FreshKey {
			keyLine = st.Warn("FRESH: each job gets a new idempotency key (requester confirmed eligibility); " + freshKeyHint)
		}
		field("idempotency key", keyLine)
		for i, line := range propertyLines(d.Properties, st) {
			name := ""
			if i == 0 {
				name = "properties"
			}
			field(name, line)
		}
		handlerFields(d, st, field)
	}
	if d.IncludePermanent || d.PermanentCount > 0 {
		field("permanent letters", permanentLine(d, st))
	}
	if len(d.States) > 0 {
		field("items", counts(d.States))
	}
	if d.Kind == replay.KindReplay && d.Fates != nil {
		f := *d.Fates
		back := fmt.Sprintf("%d of the %d confirmed died again and were captured", f.CameBack, f.Confirmed)
		if f.CameBack > 0 {
			back = st.Warn(back)
		}
		field("came back", back)
		field("settled", fmt.Sprintf("%d reached their terminal state (the policy's outcome query)", f.Settled))
		unknown := fmt.Sprintf("%d neither: nothing saw them reach their terminal state", f.Unknown)
		if f.Unknown > 0 && d.Outcomes == nil {
			unknown += " (the policy sets no outcome query)"
		}
		field("unknown", unknown)
	}
	if d.Outcomes != nil {
		field("outcomes", d.Outcomes.Summary())
		if d.Outcomes.Waiting > 0 {
			field("", fmt.Sprintf("%d confirmed items have no recorded outcome (confirmed without an outcome query, or before a run stopped)", d.Outcomes.Waiting))
		}
	}
	if d.HaltReason != "" {
		field("halted because", esc(d.HaltReason))
	}
	if len(d.Changes) > 0 {
		fmt.Fprintf(&b, "\n%s\n", st.Warn("Changed since frozen (approval will be refused):"))
		for _, c := range d.Changes {
			fmt.Fprintf(&b, "  dead letter %d: %s\n", c.DeadLetterID, esc(c.Change))
		}
	}
	writePermanent(&b, d, st)
	return strings.TrimRight(b.String(), "\n")
}

// propertyLines says how the replayed messages' properties will differ
// from the letters': all are kept but for what these lines name.
func propertyLines(n replay.PropertyNotes, st Styles) []string {
	lines := []string{"kept as received (timestamp too; the replay's time goes in x-replayed-at), except:"}
	if n.NotRecorded > 0 {
		lines = append(lines, st.Warn(fmt.Sprintf("%d letters were captured before properties were recorded: sent with content type and message id only", n.NotRecorded)))
	}
	if n.MadePersistent > 0 {
		lines = append(lines, fmt.Sprintf("%d letters were not persistent: sent persistent, so that a confirmed replay survives a broker restart", n.MadePersistent))
	}
	users := make([]string, 0, len(n.UserIDs))
	for u := range n.UserIDs {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		name := termsafe.Quote(u)
		lines = append(lines, st.Warn(fmt.Sprintf(`user_id %s on %d letters: kept only if `+"`replay run`"+` connects to RabbitMQ as %s, `+
			"otherwise sent as header x-original-user-id (RabbitMQ refuses another user's user_id)", name, n.UserIDs[u], name)))
	}
	if len(lines) == 1 {
		lines[0] = "kept as received (timestamp too; the replay's time goes in x-replayed-at)"
	}
	return lines
}

// counts lists "name n" pairs sorted by name.
func counts[K ~string](m map[K]int) string {
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (st Styles) withDefaults() Styles {
	plain := func(s ...string) string { return strings.Join(s, " ") }
	if st.Title == nil {
		st.Title = plain
	}
	if st.Warn == nil {
		st.Warn = plain
	}
	return st
}

// canaryText says what the run sends first and how long it watches for
// letters coming back. A canary of the whole cohort holds nothing back, so
// the run has no canary phase and watches after its last publish instead.
func canaryText(d replay.Detail) string {
	window := phrase.Duration(d.Stop.CanaryWindow)
	switch {
	case d.Canary <= 0:
		return "none: after the last publish, wait up to " + window + " for letters to come back"
	case !d.CanaryGates():
		return "the whole cohort, so none apart: after the last publish, wait up to " + window + " for letters to come back"
	}
	return fmt.Sprintf("%s first, then wait up to %s for them to come back", phrase.Count(d.Canary, "letter", "letters"), window)
}
