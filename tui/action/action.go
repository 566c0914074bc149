// Package action builds the forms of the governed actions the TUI offers —
// request a replay or a discard of some letters, approve, reject or cancel a
// request — and runs them through the same replay.Service the commands use.
// Every action ends in a DoneMsg; a governance refusal comes back in it as
// the *replay.Refusal the service returned, which the root shows in the
// rule's own words.
package action

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/internal/view/timespec"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/form"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// DoneMsg is the outcome of an action.
type DoneMsg struct {
	// Verb names the action: "request", "discard", "approve", "reject",
	// "cancel".
	Verb string
	// Letters are the letter ids the action was about, when chosen by id.
	Letters []int64
	// Request is the request created or reviewed.
	Request replay.Request
	// Matched counts the letters a filter matched (Create only).
	Matched int
	Err     error
}

// Outcome makes DoneMsg a frame.Outcome.
func (m DoneMsg) Outcome() error { return m.Err }

// Notice is the line shown to who when the action succeeded: the next
// step is theirs only when their groups allow it.
func (m DoneMsg) Notice(who backend.Identity) string {
	r := m.Request
	switch m.Verb {
	case "request", "discard":
		of := ""
		if m.Matched > r.Items {
			of = fmt.Sprintf(" (the oldest %d of %d matching)", r.Items, m.Matched)
		}
		return fmt.Sprintf("%s request %d is %s: %s%s; another approver must approve it (Requests screen, or `expiryctl replay approve %d`)",
			r.Kind, r.ID, r.Status, phrase.Count(r.Items, "letter", "letters"), of, r.ID)
	case "approve":
		approved := fmt.Sprintf("%s request %d is approved by %s", r.Kind, r.ID, termsafe.EscapeLine(r.ReviewedBy))
		if who.Known() && who.May("operator") {
			return approved + ": press g on it to run it"
		}
		// An approver is seldom an operator: running it is the
		// requester's (or another operator's) next step, not theirs.
		return fmt.Sprintf("%s; an operator runs it (%s requested it): g on the Requests screen, or `expiryctl replay run %d`",
			approved, termsafe.EscapeLine(r.RequestedBy), r.ID)
	case "reject":
		return fmt.Sprintf("%s request %d is rejected; its letters are free again", r.Kind, r.ID)
	case "cancel":
		return fmt.Sprintf("replay request %d is cancelled", r.ID)
	}
	return ""
}

// Selection is what a request form asks for: explicit letters, or the
// screen's current filter (then the form asks for max).
type Selection struct {
	IDs    []int64
	Filter deadletter.Filter
}

func (s Selection) describe() string {
	if len(s.IDs) == 1 {
		return fmt.Sprintf("dead letter %d", s.IDs[0])
	}
	if len(s.IDs) > 0 {
		return fmt.Sprintf("%d marked letters", len(s.IDs))
	}
	return "letters matching " + DescribeFilter(s.Filter) + " (oldest first)"
}

// DescribeFilter renders f for a title line, escaped.
func DescribeFilter(f deadletter.Filter) string {
	var parts []string
	for _, c := range f.Categories {
		parts = append(parts, "reason="+string(c))
	}
	if f.Queue != "" {
		parts = append(parts, "queue="+termsafe.EscapeLine(f.Queue))
	}
	if f.Status != "" {
		parts = append(parts, "status="+string(f.Status))
	}
	if f.Search != "" {
		parts = append(parts, "search="+termsafe.Quote(f.Search))
	}
	if len(parts) == 0 {
		return "all letters"
	}
	return strings.Join(parts, " ")
}

// WithPolicy loads the policy (when svc has a loader) and then opens the
// form spec(policy) builds; a policy that cannot be read only loses the
// hints, the service still enforces it.
func WithPolicy(svc backend.Services, spec func(*replay.Policy) form.Spec) tea.Cmd {
	return func() tea.Msg {
		var pol *replay.Policy
		if svc.Policy != nil {
			ctx, cancel := frame.Call()
			defer cancel()
			if p, err := svc.Policy(ctx); err == nil {
				pol = &p
			}
		}
		return form.OpenMsg{Spec: spec(pol)}
	}
}

// RequestForm returns the command that opens the form for a replay
// (kind replay) or discard (kind discard) request of sel. A cohort by
// filter shows how many letters the filter matches now, counted unaudited
// when the archive can (service.LetterCounter).
func RequestForm(svc backend.Services, kind replay.Kind, sel Selection) tea.Cmd {
	return WithPolicy(svc, func(pol *replay.Policy) form.Spec {
		spec := RequestSpec(svc, kind, sel, pol)
		if line := matchLine(svc, sel); line != "" {
			spec.Lines = append(spec.Lines, line)
		}
		return spec
	})
}

// RequestSpec is the form of a new request of sel, with the policy's limits
// as hints when pol is known.
func RequestSpec(svc backend.Services, kind replay.Kind, sel Selection, pol *replay.Policy) form.Spec {
	title := "Request a replay of " + sel.describe()
	if kind == replay.KindDiscard {
		title = "Request a discard of " + sel.describe()
	}
	lines := []string{"A different approver must approve it before it runs; it is audited."}
	var fields []form.Field
	if len(sel.IDs) == 0 {
		hint := "letters to take, oldest first (required)"
		if pol != nil {
			hint = fmt.Sprintf("letters to take, oldest first (at most %d)", pol.MaxCohort)
		}
		fields = append(fields, form.Field{Key: "max", Label: "max", Hint: hint, Required: true, Validate: positiveInt})
	}
	if kind == replay.KindReplay {
		rateHint := "replays per second; empty: the policy maximum"
		if pol != nil {
			rateHint = fmt.Sprintf("replays per second, at most %g; empty: %g", pol.MaxRate, pol.MaxRate)
		}
		fields = append(fields,
			form.Field{Key: "rate", Label: "rate", Hint: rateHint, Validate: positiveFloat},
			form.Field{Key: "canary", Label: "canary", Hint: "letters sent first; empty: 10% of the cohort, at least 1", Validate: nonNegativeInt},
		)
	}
	fields = append(fields, form.Field{Key: "why", Label: "why", Hint: "the incident or ticket, e.g. INC-4211", Required: true})
	if kind == replay.KindReplay {
		fields = append(fields,
			form.Field{Key: "same-handler-ok", Label: "same handler ok",
				Hint: "why the handler that failed them may take them again; empty: the run checks the handler changed"},
			form.Field{Key: "include-permanent", Label: "include permanent",
				Hint: "type yes to include letters that failed for good (conflict, validation, malformed, not-found)"},
			form.Field{Key: "via-exchange", Label: "via exchange",
				Hint: "type yes to publish through the original exchange (every queue bound there gets a copy); empty: back to the queue each failed in"},
			form.Field{Key: "unwatched", Label: "unwatched",
				Hint: "why the run need not capture the letters' dead-letter queues; empty: it captures them, and does not start when it cannot"},
			form.Field{Key: "not-before", Label: "not before",
				Hint: "publish nothing before this time: RFC 3339, or a duration from now (90m, 2h); empty: once approved", Validate: laterTime},
			form.Field{Key: "include-not-due", Label: "include not due",
				Hint: "type yes to send letters whose hold is not yet due, or that asked to retry later, without waiting"},
		)
	}
	return form.Spec{Title: title, Lines: lines, Fields: fields, Submit: func(v form.Values) tea.Cmd {
		nr := replay.NewRequest{Kind: kind, Why: v["why"], SameHandlerWhy: strings.TrimSpace(v["same-handler-ok"]),
			IncludePermanent: strings.EqualFold(strings.TrimSpace(v["include-permanent"]), "yes"),
			ViaExchange:      strings.EqualFold(strings.TrimSpace(v["via-exchange"]), "yes"),
			IncludeNotDue:    strings.EqualFold(strings.TrimSpace(v["include-not-due"]), "yes"),
			UnwatchedWhy:     strings.TrimSpace(v["unwatched"])}
		if len(sel.IDs) > 0 {
			nr.Selection = replay.Selection{IDs: append([]int64(nil), sel.IDs...)}
		} else {
			n, _ := strconv.Atoi(v["max"])
			nr.Selection = replay.Selection{Filter: sel.Filter, Max: n}
		}
		if s := v["rate"]; s != "" {
			nr.Rate, _ = strconv.ParseFloat(s, 64)
		}
		if s := v["canary"]; s != "" {
			n, _ := strconv.Atoi(s)
			nr.Canary = &n
		}
		if s := strings.TrimSpace(v["not-before"]); s != "" {
			// Validated as the form was submitted; read again against
			// the clock now, so a duration counts from the submit.
			at, err := timespec.Later("time", s, time.Now())
			if err != nil {
				return func() tea.Msg { return DoneMsg{Verb: "request", Err: err} }
			}
			nr.NotBefore = &at
		}
		verb := "request"
		if kind == replay.KindDiscard {
			verb = "discard"
		}
		ids := append([]int64(nil), sel.IDs...)
		return func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			created, err := svc.Requests.Create(ctx, nr)
			return DoneMsg{Verb: verb, Letters: ids, Request: created.Request, Matched: created.Matched, Err: err}
		}
	}}
}

// ReviewForm returns the command that opens the approve (approve true) or
// reject form of request r.
func ReviewForm(svc backend.Services, r replay.Request, approve bool) tea.Cmd {
	return frameSend(form.OpenMsg{Spec: ReviewSpec(svc, r, approve)})
}

// ReviewSpec is the approve or reject form of request r.
func ReviewSpec(svc backend.Services, r replay.Request, approve bool) form.Spec {
	verb, title := "reject", fmt.Sprintf("Reject %s request %d", r.Kind, r.ID)
	if approve {
		verb, title = "approve", fmt.Sprintf("Approve %s request %d", r.Kind, r.ID)
	}
	lines := []string{
		fmt.Sprintf("%s, requested by %s: %s", phrase.Count(r.Items, "letter", "letters"), termsafe.EscapeLine(r.RequestedBy), termsafe.EscapeLine(r.Why)),
	}
	fields := []form.Field{{Key: "why", Label: "why", Hint: "your reason, kept in the audit trail", Required: !approve}}
	if approve && r.SameHandlerOK {
		lines = append(lines, "SAME HANDLER: the run skips the handler check; the requester says: "+termsafe.EscapeLine(r.SameHandlerWhy))
	}
	if approve && r.NotBefore != nil {
		lines = append(lines, "SCHEDULED: the run publishes nothing before "+r.NotBefore.UTC().Format(time.RFC3339)+".")
	}
	if approve && r.IncludeNotDue {
		lines = append(lines, "NOT YET DUE INCLUDED: letters whose hold is not yet due, or that asked to retry later, go out without waiting.")
	}
	if approve && r.ViaExchange {
		lines = append(lines, "VIA EXCHANGE: every queue bound to the letters' original exchange gets a copy, not only the queue each failed in.")
	}
	if approve && r.IncludePermanent {
		lines = append(lines, "PERMANENT LETTERS: the cohort may hold letters that failed for good (conflict, validation, malformed, not-found).")
	}
	if approve && r.FreshKey {
		lines = append(lines, "FRESH KEY: every job gets a new idempotency key; the worker will not recognise jobs it already did.")
		fields = append(fields, form.Field{Key: "fresh", Label: "allow fresh key", Hint: "type yes to allow it", Required: true,
			Validate: func(s string) error {
				if s != "yes" {
					return errors.New(`type "yes" to allow a fresh idempotency key, or esc`)
				}
				return nil
			}})
	}
	id, hash := r.ID, r.CohortHash
	if approve {
		lines = append(lines, "cohort hash "+r.CohortHash+": you approve exactly these letters")
	}
	return form.Spec{Title: title, Lines: lines, Fields: fields, Submit: func(v form.Values) tea.Cmd {
		opts := replay.ReviewOptions{Why: v["why"], AllowFreshKey: v["fresh"] == "yes", CohortHash: hash}
		return func() tea.Msg {
			ctx, cancel := frame.Call()
			defer cancel()
			var out replay.Request
			var err error
			if approve {
				out, err = svc.Requests.Approve(ctx, id, opts)
			} else {
				out, err = svc.Requests.Reject(ctx, id, opts)
			}
			return DoneMsg{Verb: verb, Request: out, Err: err}
		}
	}}
}

// CancelForm returns the command that opens the cancel form of request r.
func CancelForm(svc backend.Services, r replay.Request) tea.Cmd {
	return frameSend(form.OpenMsg{Spec: CancelSpec(svc, r)})
}

// CancelSpec is the cancel form of request r.
func CancelSpec(svc backend.Services, r replay.Request) form.Spec {
	id := r.ID
	return form.Spec{
		Title:  fmt.Sprintf("Cancel %s request %d (%s)", r.Kind, r.ID, r.Status),
		Lines:  []string{"A running run stops at its next check; letters not yet replayed are free again."},
		Fields: []form.Field{{Key: "why", Label: "why", Hint: "kept in the audit trail", Required: true}},
		Submit: func(v form.Values) tea.Cmd {
			return func() tea.Msg {
				ctx, cancel := frame.Call()
				defer cancel()
				out, err := svc.Requests.Cancel(ctx, id, v["why"])
				return DoneMsg{Verb: "cancel", Request: out, Err: err}
			}
		},
	}
}

func frameSend(msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }

func positiveInt(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return errors.New("want a whole number above 0")
	}
	return nil
}

func nonNegativeInt(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 or more")
	}
	return nil
}

// laterTime accepts a time to come as `replay request --not-before` does.
func laterTime(s string) error {
	_, err := timespec.Later("time", s, time.Now())
	return err
}

func positiveFloat(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return errors.New("want a number above 0")
	}
	return nil
}
