package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/store"
)

// Outcome says how an audited action ended.
type Outcome string

// The outcomes an audit row can record.
const (
	// OK: the action did what was asked.
	OK Outcome = "ok"
	// Refused: a rule (governance, validation) declined the action.
	Refused Outcome = "refused"
	// Failed: the action was attempted and failed.
	Failed Outcome = "error"
)

// Entry is one audit row before it is written.
type Entry struct {
	// Actor is who ran the command (--actor, EXPIRYCTL_ACTOR or the OS user).
	// The database records its own session_user beside it.
	Actor string
	// Action is a dotted name from the action catalogue in docs/audit.md,
	// e.g. "dlq.show".
	Action string
	// Target names the object acted on, e.g. "dead_letter:42" or a queue.
	Target string
	// Details holds the parameters and results a reviewer needs; it is stored
	// as JSON.
	Details any
	Outcome Outcome
}

// Record writes e through q, by the schema's audit_append function: no
// group may insert into audit_log itself. An "ok" row of an action that
// changes governance state (replay.approve, policy.set, …) is refused there:
// only the database function that makes such a change writes its row.
//
// Record writes e through q. Pass the transaction that holds the action's
// state change so both commit together; pass the pool for a read.
//
// The database numbers the row, stamps its time and session_user, and chains
// its hash under the trail's append lock (a table only the schema's
// functions lock), held until commit. So write the audit row as the last
// statement of a transaction: the lock is then held only for the commit,
// and no transaction can hold it while waiting for another lock. A wait for
// it is bounded (30 s); past that the error names the session holding it.
func Record(ctx context.Context, q store.Querier, e Entry) error {
	_, err := Append(ctx, q, e)
	return err
}

// Append is Record that also returns where the row landed in the chain: the
// seq and hash the database gave it. `audit export` uses it to end the export
// at the row that records it. In a binary built without auditing (the
// benchmark's), it writes nothing and returns a zero Anchor.
func Append(ctx context.Context, q store.Querier, e Entry) (Anchor, error) {
	if !recording {
		return Anchor{}, nil
	}
	details := []byte("{}")
	if e.Details != nil {
		var err error
		details, err = json.Marshal(e.Details)
		if err != nil {
			return Anchor{}, fmt.Errorf("audit %s: encode details: %w", e.Action, err)
		}
	}
	details, err := withInvocation(ctx, details)
	if err != nil {
		return Anchor{}, fmt.Errorf("audit %s: %w", e.Action, err)
	}
	if e.Outcome == "" {
		e.Outcome = OK
	}
	seq, hash, err := newPostgresTrail(q).AuditAppend(ctx, e.Actor, e.Action, e.Target, details, e.Outcome)
	if err != nil {
		return Anchor{}, fmt.Errorf("audit %s: %w", e.Action, err)
	}
	h, err := ParseHash(hash)
	if err != nil {
		return Anchor{}, fmt.Errorf("audit %s: the database returned hash %q: %w", e.Action, hash, err)
	}
	return Anchor{Seq: seq, Hash: h}, nil
}

// ErrorText is err's message as an audit row records it: with the password
// of any connection URL it quotes masked, as everywhere else expiryctl
// prints an error.
func ErrorText(err error) string { return dsn.RedactText(err.Error()) }

// RecordFailure writes e for an action that err ended: outcome Refused, with
// the rule, when a governance rule refused it, else Failed; the error text
// goes in the details either way. The action's own transaction rolled back,
// so the row goes in on its own, even after the caller's context ended.
func RecordFailure(ctx context.Context, q store.Querier, e Entry, err error) error {
	details, _ := e.Details.(map[string]any)
	if details == nil {
		details = map[string]any{}
	}
	e.Outcome = Failed
	var refusal *store.Refusal
	if errors.As(err, &refusal) {
		e.Outcome = Refused
		details["rule"] = refusal.Rule
	}
	details["error"] = ErrorText(err)
	e.Details = details
	return Record(context.WithoutCancel(ctx), q, e)
}
