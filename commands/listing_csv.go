package commands

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/access"
	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/replay"
)

// The -o csv forms of the listings: one header row of snake_case names,
// the JSON fields' own where there is one, then one row per item, with
// times in RFC 3339 (UTC), durations in seconds, and every cell as stored.

// writeCSV writes headers and then a row of cells for each item.
func writeCSV[T any](w io.Writer, headers []string, items []T, cells func(T) []string) error {
	c, err := newCSV(w, headers...)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := c.row(cells(it)...); err != nil {
			return err
		}
	}
	return c.flush()
}

// csvTime is t for a CSV cell: RFC 3339 in UTC, empty when there is none.
func csvTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func csvFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

var requestCSVHeaders = []string{"id", "kind", "status", "items", "rate", "canary", "fresh_key", "requested_by", "requested_db_role",
	"created_at", "expires_at", "reviewed_by", "reviewed_db_role", "reviewed_at", "started_at", "finished_at", "cohort_hash",
	"why", "halt_reason", "confirmed", "came_back", "settled", "unknown"}

func requestCSVCells(r replay.Request) []string {
	cells := []string{strconv.FormatInt(r.ID, 10), string(r.Kind), string(r.Status), strconv.Itoa(r.Items), csvFloat(r.Rate),
		strconv.Itoa(r.Canary), strconv.FormatBool(r.FreshKey), r.RequestedBy, r.RequestedDBRole,
		csvTime(&r.CreatedAt), csvTime(&r.ExpiresAt), r.ReviewedBy, r.ReviewedDBRole, csvTime(r.ReviewedAt),
		csvTime(r.StartedAt), csvTime(r.FinishedAt), r.CohortHash, r.Why, r.HaltReason}
	fates := []string{"", "", "", ""}
	if f := r.Fates; f != nil {
		fates = []string{strconv.Itoa(f.Confirmed), strconv.Itoa(f.CameBack), strconv.Itoa(f.Settled), strconv.Itoa(f.Unknown)}
	}
	return append(cells, fates...)
}

// auditCSVHeaders end with build, after the columns a script may already
// read by position.
var auditCSVHeaders = []string{"seq", "at", "actor", "db_role", "action", "target", "outcome", "details", "prev_hash", "hash", "build"}

func auditCSVCells(r audit.Row) []string {
	return []string{strconv.FormatInt(r.Seq, 10), audit.FormatTime(r.At), r.Actor, r.DBRole, r.Action, r.Target, r.Outcome,
		string(r.Details), r.PrevHash.String(), r.Hash.String(), r.Build()}
}

var memberCSVHeaders = []string{"login", "groups", "superuser", "can_login", "bypasses"}

// memberCSVCells lists a login's groups space-separated in one cell: a
// group name has no spaces.
func memberCSVCells(m access.Member) []string {
	return []string{m.Login, strings.Join(m.Groups, " "), strconv.FormatBool(m.Superuser), strconv.FormatBool(m.CanLogin),
		strings.Join(m.Bypasses, " ")}
}

var policyChangeCSVHeaders = []string{"id", "proposed_by", "proposed_db_role", "proposed_at", "changes", "why"}

// policyChangeCSVCells writes a change's keys as KEY=VALUE, space-separated
// in key order, as the table does and `policy set` takes them.
func policyChangeCSVCells(c replay.PolicyChange) []string {
	return []string{strconv.FormatInt(c.ID, 10), c.ProposedBy, c.ProposedDBRole, csvTime(&c.ProposedAt), policyChangesText(c), c.Why}
}

var categoryCSVHeaders = []string{"reason_category", "count", "total", "oldest_dead_lettered_at",
	"per_minute_5m", "trend_5m_vs_1h", "per_minute_1h", "per_minute_24h", "attempts_min", "attempts_p50", "attempts_max", "queues"}

func categoryCSVCells(c deadletter.CategorySignals) []string {
	attempts := []string{"", "", ""}
	if a := c.Attempts; a != nil {
		attempts = []string{strconv.Itoa(a.Min), strconv.Itoa(a.P50), strconv.Itoa(a.Max)}
	}
	return append([]string{string(c.Category), strconv.FormatInt(c.Count, 10), strconv.FormatInt(c.Total, 10),
		csvTime(c.OldestDeadLetteredAt), csvFloat(c.Arrivals.Last5m.PerMinute), string(c.Arrivals.FiveMinutesVsHour.Direction),
		csvFloat(c.Arrivals.Last1h.PerMinute), csvFloat(c.Arrivals.Last24h.PerMinute)},
		append(attempts, strings.Join(c.Queues, " "))...)
}

// policyChangesText is a proposal's keys as KEY=VALUE in key order.
func policyChangesText(c replay.PolicyChange) string {
	parts := []string{}
	for _, k := range slices.Sorted(maps.Keys(c.Changes)) {
		parts = append(parts, k+"="+policyValueText(c.Changes[k]))
	}
	return strings.Join(parts, " ")
}

// policyValueText is a proposed value as `policy set` takes it: a list
// comma-separated, an interval (stored as "N microseconds" or "N days")
// as a duration a person reads, such as 1h or 90d.
func policyValueText(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = policyValueText(e)
		}
		return strings.Join(parts, ",")
	case string:
		if n, unit, ok := strings.Cut(v, " "); ok {
			count, err := strconv.ParseInt(n, 10, 64)
			switch {
			case err != nil:
			case unit == "microseconds":
				return phrase.Duration(time.Duration(count) * time.Microsecond)
			case unit == "days":
				return phrase.Duration(time.Duration(count) * 24 * time.Hour)
			}
		}
		return v
	}
	return fmt.Sprint(v)
}
