// Package reconcile checks that the governance tables hold nothing the
// audit trail does not account for. Every change to a replay request, its
// items and the policy is made by a database function that writes its
// audit row in the same transaction; replaying those rows gives the state
// the tables must have. A state with no event behind it (a request flipped
// to approved by hand, an item reset to pending, a policy value nobody
// proposed and approved) was written around the rules, by the schema's
// owner or a superuser.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// Finding is one state of a governance table that no event accounts for.
type Finding struct {
	Table  string `json:"table"`
	Key    string `json:"key"`
	Column string `json:"column"`
	// Detail says what the table holds and what the trail says.
	Detail string `json:"detail"`
}

// MismatchError reports the findings of a reconciliation that found any.
type MismatchError struct {
	Findings []Finding
}

func (e *MismatchError) Error() string {
	f := e.Findings[0]
	more := ""
	if len(e.Findings) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(e.Findings)-1)
	}
	return fmt.Sprintf("the governance tables do not match the audit trail: %s %s column %s: %s%s", f.Table, f.Key, f.Column, f.Detail, more)
}

// Report is what a reconciliation compared.
type Report struct {
	Requests int `json:"requests"`
	Events   int `json:"events"`
	// PolicyFrom is the seq of the policy event the policy was compared
	// with, 0 when none: then with the schema's defaults.
	PolicyFrom int64 `json:"policy_from_seq"`
}

// Check replays the trail's governance events and compares them with the
// replay requests, their items and the policy, in one snapshot. It returns
// a *MismatchError listing every finding, or another error when it could
// not read.
func Check(ctx context.Context, pool *pgxpool.Pool) (Report, error) {
	var rep Report
	var findings []Finding
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		events, err := audit.GovernanceEvents(ctx, tx)
		if err != nil {
			return err
		}
		ledger, err := replay.Ledger(ctx, tx)
		if err != nil {
			return err
		}
		rep.Events, rep.Requests = len(events), len(ledger)
		findings = append(findings, checkRequests(ledger, events)...)
		policy, err := replay.PolicyDocument(ctx, tx)
		if err != nil {
			return err
		}
		defaults, err := replay.PolicyDefaults(ctx, pool)
		if err != nil {
			return err
		}
		var f []Finding
		f, rep.PolicyFrom = checkPolicy(policy, events, defaults)
		if rep.PolicyFrom == 0 {
			f = comparePolicy(policy, defaults, "the schema's defaults (no policy event)", "updated_at", "updated_by")
		}
		findings = append(findings, f...)
		members, err := access.Members(ctx, tx)
		if err != nil {
			return err
		}
		owner, err := access.SchemaOwner(ctx, tx)
		if err != nil {
			return err
		}
		d, err := store.ReadDeployment(ctx, tx)
		if err != nil {
			return err
		}
		findings = append(findings, checkMembership(members, owner, events, d.Named())...)
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	if len(findings) > 0 {
		return rep, &MismatchError{Findings: findings}
	}
	return rep, nil
}

// statusAfter is the status each event leaves a request in; events not
// listed leave it as it was.
var statusAfter = map[string]replay.Status{
	"replay.request":   replay.StatusPending,
	"replay.approve":   replay.StatusApproved,
	"replay.reject":    replay.StatusRejected,
	"replay.expire":    replay.StatusExpired,
	"replay.cancel":    replay.StatusCancelled,
	"replay.run.start": replay.StatusRunning,
	"replay.halt":      replay.StatusHalted,
	"replay.complete":  replay.StatusCompleted,
}

func checkRequests(ledger []replay.LedgerEntry, events []audit.Event) []Finding {
	byRequest := map[int64][]audit.Event{}
	for _, e := range events {
		id, ok := strings.CutPrefix(e.Target, "replay_request:")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			continue
		}
		byRequest[n] = append(byRequest[n], e)
	}
	var out []Finding
	for _, r := range ledger {
		key := "id " + strconv.FormatInt(r.ID, 10)
		evs := byRequest[r.ID]
		if len(evs) == 0 || evs[0].Action != "replay.request" {
			out = append(out, Finding{"replay_requests", key, "id", "no replay.request event created this request: it was inserted outside expiryctl"})
			continue
		}
		var status replay.Status
		var statusSeq int64
		var reviewer string
		var ran bool
		var complete, halt *audit.Event
		for i, e := range evs {
			if s, ok := statusAfter[e.Action]; ok {
				status, statusSeq = s, e.Seq
			}
			switch e.Action {
			case "replay.approve", "replay.reject":
				reviewer = e.DBRole
			case "replay.run.start":
				ran = true
			case "replay.complete":
				complete = &evs[i]
			case "replay.halt":
				halt = &evs[i]
			}
		}
		if r.Status != status {
			out = append(out, Finding{"replay_requests", key, "status",
				fmt.Sprintf("%s, but the trail leaves it %s (seq %d): no event made it %s", r.Status, status, statusSeq, r.Status)})
		}
		if r.ReviewedDBRole != reviewer {
			out = append(out, Finding{"replay_requests", key, "reviewed_db_role",
				fmt.Sprintf("%q, but the trail's review was by %q", r.ReviewedDBRole, reviewer)})
		}
		out = append(out, checkItems(r, key, ran, complete)...)
		if r.Status == replay.StatusHalted && status == replay.StatusHalted && halt != nil {
			out = append(out, checkHalted(r, *halt)...)
		}
	}
	return out
}

// checkItems compares a request's items with its runs: a request that
// never ran has only pending items; a completed one has exactly the
// outcomes its replay.complete event lists.
func checkItems(r replay.LedgerEntry, key string, ran bool, complete *audit.Event) []Finding {
	var out []Finding
	if !ran {
		for _, state := range sortedStates(r.States) {
			if state != "pending" {
				out = append(out, Finding{"replay_items", "request " + strconv.FormatInt(r.ID, 10), "state",
					fmt.Sprintf("%d items %s, but the request never ran (no replay.run.start event)", r.States[state], state)})
			}
		}
		return out
	}
	if complete == nil || r.Status != replay.StatusCompleted {
		return out
	}
	var recorded struct {
		Confirmed []int64 `json:"confirmed"`
		Skipped   []struct {
			ID int64 `json:"dead_letter_id"`
		} `json:"skipped"`
		Failed []struct {
			ID int64 `json:"dead_letter_id"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(complete.Details, &recorded); err != nil {
		return append(out, Finding{"audit_log", "seq " + strconv.FormatInt(complete.Seq, 10), "details",
			"the replay.complete event's outcomes cannot be read: " + err.Error()})
	}
	want := map[int64]string{}
	for _, id := range recorded.Confirmed {
		want[id] = "confirmed"
	}
	for _, s := range recorded.Skipped {
		want[s.ID] = "skipped"
	}
	for _, f := range recorded.Failed {
		want[f.ID] = "failed"
	}
	ids := make([]int64, 0, len(want)+len(r.Outcomes))
	for id := range want {
		ids = append(ids, id)
	}
	for id := range r.Outcomes {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		got, wanted := r.Outcomes[id], want[id]
		if got == wanted {
			continue
		}
		if got == "" {
			got = "not decided"
		}
		if wanted == "" {
			wanted = "no outcome"
		}
		out = append(out, Finding{"replay_items", fmt.Sprintf("request %d dead letter %d", r.ID, id), "state",
			fmt.Sprintf("%s, but the replay.complete event (seq %d) records %s", got, complete.Seq, wanted)})
	}
	return out
}

// checkHalted compares a halted request's decided items with the counts its
// replay.halt event recorded: the runner stops deciding items before it
// writes that event, so they must still agree.
func checkHalted(r replay.LedgerEntry, halt audit.Event) []Finding {
	var counted map[string]any
	if err := json.Unmarshal(halt.Details, &counted); err != nil {
		return []Finding{{"audit_log", "seq " + strconv.FormatInt(halt.Seq, 10), "details",
			"the replay.halt event's counts cannot be read: " + err.Error()}}
	}
	var out []Finding
	for _, state := range []string{"confirmed", "skipped", "failed"} {
		n, ok := counted[state].(float64)
		if !ok {
			continue
		}
		if r.States[state] != int(n) {
			out = append(out, Finding{"replay_items", "request " + strconv.FormatInt(r.ID, 10), "state",
				fmt.Sprintf("%d items %s, but the replay.halt event (seq %d) counted %d", r.States[state], state, halt.Seq, int(n))})
		}
	}
	return out
}

func sortedStates(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkMembership compares group membership with the trail's access
// events: a grant the trail records (and no later revoke) must still hold,
// and a member must hold no group the trail never granted it. A named
// deployment's groups are its own (own), so every member is checked; the
// unnamed deployment's are shared by every database of the cluster that
// uses them, so only the logins that made a governance change here are.
// The owner and superusers need no group and are left out.
func checkMembership(members []access.Member, owner string, events []audit.Event, own bool) []Finding {
	granted := map[grant]int64{}
	for _, e := range events {
		if e.Action != "access.grant" && e.Action != "access.revoke" {
			continue
		}
		var d struct {
			Login  string   `json:"login"`
			Groups []string `json:"groups"`
		}
		if json.Unmarshal(e.Details, &d) != nil {
			continue
		}
		for _, g := range d.Groups {
			if e.Action == "access.grant" {
				granted[grant{d.Login, g}] = e.Seq
			} else {
				delete(granted, grant{d.Login, g})
			}
		}
	}
	now := map[grant]bool{}
	super := map[string]bool{owner: true}
	for _, m := range members {
		if m.Superuser {
			super[m.Login] = true
		}
		for _, g := range m.Groups {
			now[grant{m.Login, g}] = true
		}
	}
	acted := map[string]bool{}
	for _, e := range events {
		if !super[e.DBRole] {
			acted[e.DBRole] = true
		}
	}
	var out []Finding
	for _, gr := range sortedGrants(granted) {
		if !now[gr] {
			out = append(out, Finding{"pg_auth_members", "login " + gr.login, gr.group,
				fmt.Sprintf("not a member, but granted by seq %d and never revoked here: revoked outside expiryctl", granted[gr])})
		}
	}
	for _, m := range members {
		if !(own || acted[m.Login]) || super[m.Login] {
			continue
		}
		why := "a member that made governance changes here, with no access.grant event for it: granted outside expiryctl"
		if own {
			why = "a member of the deployment's group with no access.grant event for it: granted outside expiryctl"
		}
		for _, g := range m.Groups {
			if _, ok := granted[grant{m.Login, g}]; !ok {
				out = append(out, Finding{"pg_auth_members", "login " + m.Login, g, why})
			}
		}
	}
	return out
}

// grant is one login's membership of one group.
type grant struct{ login, group string }

func sortedGrants(m map[grant]int64) []grant {
	out := make([]grant, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].login < out[j].login || out[i].login == out[j].login && out[i].group < out[j].group
	})
	return out
}

// checkPolicy compares the policy with the "after" of the last event that
// changed it; from is that event's seq, 0 when there is none. A key the
// event does not record, a column added since, holds its default.
func checkPolicy(policy map[string]any, events []audit.Event, defaults map[string]any) (f []Finding, from int64) {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Action != "policy.set" && e.Action != "policy.approve" {
			continue
		}
		var d struct {
			After map[string]any `json:"after"`
		}
		if err := json.Unmarshal(e.Details, &d); err != nil || d.After == nil {
			return []Finding{{"audit_log", "seq " + strconv.FormatInt(e.Seq, 10), "details",
				"the policy event records no policy after it"}}, e.Seq
		}
		for k, v := range defaults {
			if _, recorded := d.After[k]; !recorded {
				d.After[k] = v
			}
		}
		return comparePolicy(policy, d.After, fmt.Sprintf("the %s event (seq %d)", e.Action, e.Seq)), e.Seq
	}
	return nil, 0
}

// comparePolicy reports each key whose value differs from want, leaving out
// the keys named in ignore.
func comparePolicy(policy, want map[string]any, source string, ignore ...string) []Finding {
	skip := map[string]bool{}
	for _, k := range ignore {
		skip[k] = true
	}
	keys := map[string]bool{}
	for k := range policy {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		if !skip[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []Finding
	for _, k := range names {
		if !reflect.DeepEqual(policy[k], want[k]) {
			out = append(out, Finding{"policy", "singleton", k, fmt.Sprintf("%s, but %s leaves it %s", show(policy[k]), source, show(want[k]))})
		}
	}
	return out
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Audited is Check, recorded as an audit.reconcile row by actor with what
// it compared and found.
func Audited(ctx context.Context, pool *pgxpool.Pool, actor string) (Report, error) {
	rep, err := Check(ctx, pool)
	details := map[string]any{"requests": rep.Requests, "events": rep.Events, "policy_from_seq": rep.PolicyFrom}
	outcome := audit.OK
	var mismatch *MismatchError
	switch {
	case errors.As(err, &mismatch):
		details["findings"] = mismatch.Findings
		outcome = audit.Failed
	case err != nil:
		details["error"] = audit.ErrorText(err)
		outcome = audit.Failed
	}
	if rerr := audit.Record(context.WithoutCancel(ctx), pool, audit.Entry{Actor: actor, Action: "audit.reconcile",
		Details: details, Outcome: outcome}); rerr != nil && err == nil {
		return rep, rerr
	}
	return rep, err
}
