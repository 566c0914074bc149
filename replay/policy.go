package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/store"
)

// Policy is the governance policy, one row in PostgreSQL. A requester cannot
// loosen it with a local file, nor with psql: it changes only through the
// schema's policy_set and policy_review functions (SetPolicy,
// ReviewPolicyChange), under four-eyes, audited. Its JSON carries the
// durations in seconds, named so (approval_ttl_seconds, canary_window_seconds,
// outcome_window_seconds, retention_seconds): see MarshalJSON.
type Policy struct {
	// Approvers are the logins that may approve or reject requests (never
	// their own); empty means every member of expiryctl_approver.
	Approvers []string `json:"approvers"`
	// MaxCohort bounds the letters in one request.
	MaxCohort int `json:"max_cohort"`
	// MaxRate is the highest replay rate a request may ask for, per second.
	MaxRate float64 `json:"max_rate"`
	// ApprovalTTL is how long a request waits for review, and how long an
	// approval waits for its run.
	ApprovalTTL time.Duration `json:"-"`
	// The default stop conditions a new request carries.
	StopFailureRatio float64       `json:"stop_failure_ratio"`
	StopQueueDepth   int           `json:"stop_queue_depth"`
	StopRedeadRatio  float64       `json:"stop_redead_ratio"`
	CanaryWindow     time.Duration `json:"-"`
	// IdentityMode is "declared" (--actor, EXPIRYCTL_ACTOR or the OS user,
	// with the database role recorded beside it) or "db-role" (the actor is
	// the PostgreSQL session_user and --actor is refused).
	IdentityMode string `json:"identity_mode"`
	// EligibilityQuery, when set, is run before each item is replayed,
	// against the reservation database (`replay run --outcome-url`, else
	// expiryctl's own), with $1 reservation_id, $2 idempotency_key, $3
	// expected_version; it returns
	// one row (eligible boolean, reason text). No row means not eligible.
	EligibilityQuery string `json:"eligibility_query"`
	// OutcomeQuery, when set, is asked about each item a run confirmed,
	// against the reservation database (`replay run --outcome-url`, else
	// expiryctl's own), with $1 reservation_id, $2 idempotency_key, $3
	// expected_version and $4 published_at (when the runner sent it); it
	// returns one row (terminal_at timestamptz or null, duplicate boolean).
	// No row, or a null terminal_at, means not terminal yet; duplicate true
	// means the idempotency key was already recorded before this replay.
	OutcomeQuery string `json:"outcome_query"`
	// OutcomeWindow is how long after its confirm an item has to reach its
	// terminal state before it counts as unsettled.
	OutcomeWindow time.Duration `json:"-"`
	// StopUnsettledRatio halts a run when more than this share of the
	// items whose outcome is known (terminal, or past their window) are
	// past their window and still not terminal.
	StopUnsettledRatio float64 `json:"stop_unsettled_ratio"`
	// StopConflictRatio halts a run when more than this share of the
	// terminal items were duplicates (idempotency conflicts).
	StopConflictRatio float64 `json:"stop_conflict_ratio"`
	// SignedApprovals requires every runner to run only approvals signed by
	// a key of its keyring (see ApprovalCheck); a runner can require them
	// without it.
	SignedApprovals bool `json:"signed_approvals"`
	// GapQuery, when set, counts the holds past their deadline in the
	// reservation database itself (`--outcome-url`, else expiryctl's own),
	// those no dead letter speaks for included: it takes no parameter and
	// returns one row (past_deadline bigint, oldest_deadline timestamptz).
	// `dlq summary`, the terminal UI's summary and `metrics serve` show it
	// beside the archive's overdue letters (HoldsPastDeadline).
	GapQuery string `json:"gap_query"`
	// JobTables are the approved mappings of teams' own jobs tables, by
	// the queue name their letters carry
	// (jobtable://CONNECTION/SCHEMA.TABLE): capture and replay
	// read and write such a table only through its mapping
	// (docs/jobtable.md), and refuse one that has none.
	JobTables map[string]json.RawMessage `json:"job_tables"`
	// Retention is how long dead-letter payloads and headers are kept before
	// `dlq purge` redacts them.
	Retention time.Duration `json:"-"`
	UpdatedAt time.Time     `json:"updated_at"`
	UpdatedBy string        `json:"updated_by"`
}

// Identity modes.
const (
	IdentityDeclared = "declared"
	IdentityDBRole   = "db-role"
)

// LoadPolicy reads the policy. q may be a pool or a transaction.
func LoadPolicy(ctx context.Context, q store.Querier) (Policy, error) {
	return onPostgres(q).PolicyGet(ctx)
}

// policyKey describes one settable key: its column and how to read a value.
type policyKey struct {
	column string
	parse  func(string) (any, error)
	help   string
}

var policyKeys = map[string]policyKey{
	"approvers":          {"approvers", parseList, "comma-separated identities, e.g. bob,carol"},
	"max_cohort":         {"max_cohort", parsePositiveInt, "letters per request, e.g. 500"},
	"max_rate":           {"max_rate", parsePositiveFloat, "replays per second, e.g. 50"},
	"approval_ttl":       {"approval_ttl", parseInterval, "a duration, e.g. 1h or 30m"},
	"stop_failure_ratio": {"stop_failure_ratio", parseRatio, "a ratio from 0 to 1, e.g. 0.05"},
	"stop_queue_depth":   {"stop_queue_depth", parsePositiveInt, "messages in the target queue, e.g. 10000"},
	"stop_redead_ratio":  {"stop_redead_ratio", parseRatio, "a ratio from 0 to 1, e.g. 0.2"},
	"canary_window":      {"canary_window", parseInterval, "a duration, e.g. 30s"},
	"identity_mode":      {"identity_mode", parseIdentityMode, "declared or db-role"},
	"eligibility_query":  {"eligibility_query", parseText, "SQL over $1 reservation_id, $2 idempotency_key, $3 expected_version returning (eligible boolean, reason text); empty to disable"},
	"retention":          {"retention", parseInterval, "a duration, e.g. 2160h (90 days) or 90d"},
	"outcome_query": {"outcome_query", parseText, "SQL over $1 reservation_id, $2 idempotency_key, $3 expected_version, $4 published_at " +
		"returning (terminal_at timestamptz or null, duplicate boolean), run against --outcome-url; empty to disable"},
	"outcome_window":       {"outcome_window", parseInterval, "a duration, e.g. 2m: how long a confirmed item has to reach its terminal state"},
	"stop_unsettled_ratio": {"stop_unsettled_ratio", parseRatio, "a ratio from 0 to 1, e.g. 0.05"},
	"stop_conflict_ratio":  {"stop_conflict_ratio", parseRatio, "a ratio from 0 to 1, e.g. 0.2"},
	"signed_approvals":     {"signed_approvals", parseBool, "true or false: every runner runs only approvals signed by a key of its keyring (replay run --keyring)"},
	"gap_query": {"gap_query", parseText, "SQL without parameters returning (past_deadline bigint, oldest_deadline timestamptz): " +
		"the holds past their deadline in the reservation database, run against --outcome-url; empty to disable"},
	"job_tables": {"job_tables", parseJobTables, `a JSON object of jobs-table mappings by queue name, ` +
		`{"jobtable://CONNECTION/SCHEMA.TABLE": {…mapping…}}, merged into those approved; null removes one (docs/jobtable.md)`},
}

// PolicyKeys lists the keys `policy set` accepts, with what each takes.
func PolicyKeys() map[string]string {
	out := make(map[string]string, len(policyKeys))
	for k, v := range policyKeys {
		out[k] = v.help
	}
	return out
}

func policyKeyNames() string {
	names := make([]string, 0, len(policyKeys))
	for k := range policyKeys {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ParsePolicyChanges reads KEY=VALUE arguments, refusing unknown keys and bad
// values with what would be right.
func ParsePolicyChanges(args []string) (map[string]any, error) {
	changes := map[string]any{}
	for _, arg := range args {
		key, value, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not KEY=VALUE: e.g. max_rate=50 (keys: %s)", arg, policyKeyNames())
		}
		k, known := policyKeys[key]
		if !known {
			return nil, fmt.Errorf("unknown policy key %q: valid keys are %s", key, policyKeyNames())
		}
		v, err := k.parse(value)
		if err != nil {
			return nil, fmt.Errorf("invalid %s=%q: want %s", key, value, k.help)
		}
		changes[key] = v
	}
	if len(changes) == 0 {
		return nil, fmt.Errorf("name at least one KEY=VALUE (keys: %s)", policyKeyNames())
	}
	return changes, nil
}

// PolicySetResult is what `policy set` did.
type PolicySetResult struct {
	// Applied is true when the change took effect at once: the caller is
	// the schema's owner. Otherwise ChangeID names the proposal that a
	// different admin must approve.
	Applied  bool   `json:"applied"`
	ChangeID int64  `json:"change_id,omitempty"`
	Policy   Policy `json:"policy"`
}

// SetPolicy changes the policy through the schema's policy_set function.
// An admin's change is recorded as a proposal (PolicySetResult.ChangeID)
// and takes effect only when a different admin's login approves it
// (ReviewPolicyChange); the owner's change, the first policy included,
// applies at once. Either way the database audits it, with the values before
// and after when it applies. Loosening and tightening are both changes.
func SetPolicy(ctx context.Context, pool *pgxpool.Pool, actor string, changes map[string]any) (PolicySetResult, error) {
	return SetPolicyWhy(ctx, pool, actor, changes, "")
}

// SetPolicyWhy is SetPolicy with the reason the proposer gives.
func SetPolicyWhy(ctx context.Context, pool *pgxpool.Pool, actor string, changes map[string]any, why string) (PolicySetResult, error) {
	var res PolicySetResult
	err := inTx(ctx, pool, func(t tables) error {
		id, applied, err := t.PolicySet(ctx, actor, changes, why)
		if err != nil {
			return err
		}
		res.Applied = applied
		if id != nil {
			res.ChangeID = *id
		}
		res.Policy, err = t.PolicyGet(ctx)
		return err
	})
	if err != nil {
		recordPolicyRefusal(ctx, pool, actor, "policy.set", "policy", err, map[string]any{"changes": changes, "why": why})
	}
	return res, err
}

// PolicyChange is a proposed change of the policy.
type PolicyChange struct {
	ID             int64          `json:"id"`
	Changes        map[string]any `json:"changes"`
	Why            string         `json:"why"`
	ProposedBy     string         `json:"proposed_by"`
	ProposedDBRole string         `json:"proposed_db_role"`
	ProposedAt     time.Time      `json:"proposed_at"`
	Status         string         `json:"status"`
	ReviewedBy     string         `json:"reviewed_by,omitempty"`
	ReviewedDBRole string         `json:"reviewed_db_role,omitempty"`
	ReviewedAt     *time.Time     `json:"reviewed_at,omitempty"`
}

// PendingPolicyChanges lists the proposals waiting for a second admin,
// oldest first. It does not audit: callers record their own read.
func PendingPolicyChanges(ctx context.Context, q store.Querier) ([]PolicyChange, error) {
	return onPostgres(q).PolicyChangesPending(ctx)
}

// ReviewPolicyChange approves (the change applies) or rejects proposal id,
// through the schema's policy_review function. The database refuses a
// reviewer whose login proposed it, whatever the label, and a proposal
// already reviewed.
func ReviewPolicyChange(ctx context.Context, pool *pgxpool.Pool, actor string, id int64, approve bool, why string) (Policy, error) {
	decision, action := "approve", "policy.approve"
	if !approve {
		decision, action = "reject", "policy.reject"
	}
	var after Policy
	err := inTx(ctx, pool, func(t tables) error {
		if err := t.PolicyReview(ctx, actor, id, decision, why); err != nil {
			return err
		}
		var err error
		after, err = t.PolicyGet(ctx)
		return err
	})
	if err != nil {
		recordPolicyRefusal(ctx, pool, actor, action, fmt.Sprintf("policy_change:%d", id), err, map[string]any{"why": why})
	}
	return after, err
}

// PolicyChangeNotFoundError names a proposal that does not exist.
type PolicyChangeNotFoundError struct{ ID int64 }

func (e *PolicyChangeNotFoundError) Error() string {
	return fmt.Sprintf("policy change %d not found: `expiryctl policy show` lists the pending ones", e.ID)
}

// Is makes errors.Is(err, deadletter.ErrNotFound) true, for the exit code.
func (e *PolicyChangeNotFoundError) Is(target error) bool { return target == deadletter.ErrNotFound }

// recordPolicyRefusal audits a policy change that was refused or failed; the
// change rolled back, so the row goes in on its own.
func recordPolicyRefusal(ctx context.Context, pool *pgxpool.Pool, actor, action, target string, err error, details map[string]any) {
	(&Service{Pool: pool, Actor: actor}).recordRefusal(ctx, action, target, err, details)
}

// intervalValue is a PostgreSQL interval literal.
type intervalValue string

func parseInterval(s string) (any, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad days")
		}
		return intervalValue(fmt.Sprintf("%d days", n)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("bad duration")
	}
	return intervalValue(fmt.Sprintf("%d microseconds", d.Microseconds())), nil
}

func parseList(s string) (any, error) {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePositiveInt(s string) (any, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("not a positive integer")
	}
	return n, nil
}

func parsePositiveFloat(s string) (any, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return nil, fmt.Errorf("not a positive number")
	}
	return f, nil
}

func parseRatio(s string) (any, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1 {
		return nil, fmt.Errorf("not a ratio")
	}
	return f, nil
}

func parseBool(s string) (any, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil, fmt.Errorf("not true or false")
	}
	return b, nil
}

func parseIdentityMode(s string) (any, error) {
	if s != IdentityDeclared && s != IdentityDBRole {
		return nil, fmt.Errorf("not an identity mode")
	}
	return s, nil
}

func parseText(s string) (any, error) { return s, nil }

// parseJobTables reads job_tables' value: an object of mappings (or null)
// by queue name. Each mapping's columns are checked by the jobs-table
// driver against the live table; here only its shape.
func parseJobTables(s string) (any, error) {
	var tables map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &tables); err != nil || tables == nil {
		return nil, errors.New("not a JSON object")
	}
	for name, m := range tables {
		if !strings.HasPrefix(name, "jobtable://") {
			return nil, fmt.Errorf("%q is not a jobs table's queue name", name)
		}
		if t := strings.TrimSpace(string(m)); t != "null" && !strings.HasPrefix(t, "{") {
			return nil, fmt.Errorf("the mapping of %s is not an object", name)
		}
	}
	return tables, nil
}
