package replay

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/store"
)

// Policy is the governance policy, one row in PostgreSQL. A requester cannot
// loosen it with a local file: it changes only through SetPolicy, audited.
type Policy struct {
	// Approvers may approve or reject requests (never their own).
	Approvers []string `json:"approvers"`
	// MaxCohort bounds the letters in one request.
	MaxCohort int `json:"max_cohort"`
	// MaxRate is the highest replay rate a request may ask for, per second.
	MaxRate float64 `json:"max_rate"`
	// ApprovalTTL is how long a request waits for review, and how long an
	// approval waits for its run.
	ApprovalTTL time.Duration `json:"approval_ttl"`
	// The default stop conditions a new request carries.
	StopFailureRatio float64       `json:"stop_failure_ratio"`
	StopQueueDepth   int           `json:"stop_queue_depth"`
	StopRedeadRatio  float64       `json:"stop_redead_ratio"`
	CanaryWindow     time.Duration `json:"canary_window"`
	// IdentityMode is "declared" (--actor, EXPIRYCTL_ACTOR or the OS user,
	// with the database role recorded beside it) or "db-role" (the actor is
	// the PostgreSQL session_user and --actor is refused).
	IdentityMode string `json:"identity_mode"`
	// EligibilityQuery, when set, is run before each item is replayed with
	// $1 reservation_id, $2 idempotency_key, $3 expected_version; it returns
	// one row (eligible boolean, reason text). No row means not eligible.
	EligibilityQuery string `json:"eligibility_query"`
	// Retention is how long dead-letter payloads and headers are kept before
	// `dlq purge` redacts them.
	Retention time.Duration `json:"retention"`
	UpdatedAt time.Time     `json:"updated_at"`
	UpdatedBy string        `json:"updated_by"`
}

// Identity modes.
const (
	IdentityDeclared = "declared"
	IdentityDBRole   = "db-role"
)

// LoadPolicy reads the policy.
func LoadPolicy(ctx context.Context, q store.Querier) (Policy, error) {
	var p Policy
	var ttl, window, retention time.Duration
	err := q.QueryRow(ctx, `SELECT approvers, max_cohort, max_rate::float8,
		extract(epoch FROM approval_ttl)::float8, stop_failure_ratio::float8, stop_queue_depth,
		stop_redead_ratio::float8, extract(epoch FROM canary_window)::float8, identity_mode,
		eligibility_query, extract(epoch FROM retention)::float8, updated_at, updated_by
		FROM expiryctl.policy WHERE singleton`).Scan(&p.Approvers, &p.MaxCohort, &p.MaxRate,
		durationScanner{&ttl}, &p.StopFailureRatio, &p.StopQueueDepth, &p.StopRedeadRatio,
		durationScanner{&window}, &p.IdentityMode, &p.EligibilityQuery, durationScanner{&retention}, &p.UpdatedAt, &p.UpdatedBy)
	if err != nil {
		return Policy{}, fmt.Errorf("read policy: %w", err)
	}
	p.ApprovalTTL, p.CanaryWindow, p.Retention = ttl, window, retention
	if p.Approvers == nil {
		p.Approvers = []string{}
	}
	return p, nil
}

// durationScanner reads seconds (float8) into a time.Duration.
type durationScanner struct{ d *time.Duration }

func (s durationScanner) Scan(src any) error {
	switch v := src.(type) {
	case float64:
		*s.d = time.Duration(v * float64(time.Second))
		return nil
	case nil:
		*s.d = 0
		return nil
	}
	return fmt.Errorf("unexpected %T for a duration", src)
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

// SetPolicy applies changes (from ParsePolicyChanges) and audits the change
// with the values before and after, in one transaction. In db-role identity
// mode only the database role itself may be the actor.
func SetPolicy(ctx context.Context, pool *pgxpool.Pool, actor string, changes map[string]any) (Policy, error) {
	var after Policy
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM expiryctl.policy WHERE singleton FOR UPDATE`); err != nil {
			return err
		}
		before, err := LoadPolicy(ctx, tx)
		if err != nil {
			return err
		}
		sets := []string{"updated_at = now()", "updated_by = $1"}
		args := []any{actor}
		keys := make([]string, 0, len(changes))
		for k := range changes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, changes[k])
			cast := ""
			if _, isInterval := changes[k].(intervalValue); isInterval {
				cast = "::text::interval"
			}
			sets = append(sets, fmt.Sprintf("%s = $%d%s", policyKeys[k].column, len(args), cast))
		}
		if _, err := tx.Exec(ctx, "UPDATE expiryctl.policy SET "+strings.Join(sets, ", ")+" WHERE singleton", args...); err != nil {
			return fmt.Errorf("update policy: %w", err)
		}
		if after, err = LoadPolicy(ctx, tx); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Actor: actor, Action: "policy.set", Target: "policy",
			Details: map[string]any{"keys": keys, "before": before, "after": after}})
	})
	return after, err
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

func parseIdentityMode(s string) (any, error) {
	if s != IdentityDeclared && s != IdentityDBRole {
		return nil, fmt.Errorf("not an identity mode")
	}
	return s, nil
}

func parseText(s string) (any, error) { return s, nil }
