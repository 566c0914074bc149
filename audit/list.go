package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Row is one audit row as listings show it.
//
// Details holds the exact text of details::text, so that Row.Fields can
// recompute the row's hash; marshalling a Row to JSON embeds it as a JSON
// value and compacts it, so `audit list -o json` output is for reading, not
// for verification (use `audit export` for that).
type Row struct {
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"`
	Actor    string          `json:"actor"`
	DBRole   string          `json:"db_role"`
	Action   string          `json:"action"`
	Target   string          `json:"target"`
	Details  json.RawMessage `json:"details"`
	Outcome  string          `json:"outcome"`
	PrevHash Hash            `json:"prev_hash"`
	Hash     Hash            `json:"hash"`
}

// MarshalJSON writes at as RFC 3339 in UTC with exactly six fractional
// digits (time.Time's own encoding drops trailing zeros and keeps the zone),
// keeping the fields in export order, then the row's build (Build) for
// people, "" when it names none.
func (r Row) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Seq      int64           `json:"seq"`
		At       string          `json:"at"`
		Actor    string          `json:"actor"`
		DBRole   string          `json:"db_role"`
		Action   string          `json:"action"`
		Target   string          `json:"target"`
		Details  json.RawMessage `json:"details"`
		Outcome  string          `json:"outcome"`
		PrevHash Hash            `json:"prev_hash"`
		Hash     Hash            `json:"hash"`
		Build    string          `json:"build"`
	}{r.Seq, FormatTime(r.At), r.Actor, r.DBRole, r.Action, r.Target, r.Details, r.Outcome, r.PrevHash, r.Hash, r.Build()})
}

// Build is the build of expiryctl that wrote the row, as its client named
// it when it connected ("v1.2.0 (commit 1a2b…, modified)"): the details'
// "build", which the database sets from the session (docs/audit.md,
// "Which build wrote a row"). "" when the session named none: a row
// written before builds were recorded, or by another client.
func (r Row) Build() string {
	var d struct {
		Build string `json:"build"`
	}
	if json.Unmarshal(r.Details, &d) != nil {
		return ""
	}
	return d.Build
}

// Fields returns the values r's hash covers.
func (r *Row) Fields() ChainFields {
	return ChainFields{Seq: r.Seq, AtMicros: r.At.UnixMicro(), Actor: r.Actor, DBRole: r.DBRole, Action: r.Action,
		Target: r.Target, Details: string(r.Details), Outcome: r.Outcome, PrevHash: r.PrevHash}
}

// Filter narrows a listing or an export. Zero fields do not filter; set
// fields must all match.
type Filter struct {
	// Since keeps rows written at or after it.
	Since time.Time `json:"since,omitzero"`
	// Until keeps rows written before it.
	Until time.Time `json:"until,omitzero"`
	// Actor, Action and Target keep rows whose field equals them exactly.
	Actor  string `json:"actor,omitempty"`
	Action string `json:"action,omitempty"`
	Target string `json:"target,omitempty"`
	// ThroughSeq, when positive, keeps rows with seq ≤ it. `audit export`
	// sets it to the seq of the row that records the export, so the export
	// is exactly the trail up to and including that row, whatever is written
	// while it runs.
	ThroughSeq int64 `json:"through_seq,omitempty"`
}

// IsZero reports whether f keeps every row, i.e. whether an export made with
// it is the whole, contiguous chain.
func (f Filter) IsZero() bool {
	return f.Since.IsZero() && f.Until.IsZero() && f.Actor == "" && f.Action == "" && f.Target == ""
}

// keeps reports whether f keeps a row, as the database's query for it
// does: times are compared at the microsecond the database stores them in.
func (f Filter) keeps(seq, atMicros int64, actor, action, target string) bool {
	switch {
	case !f.Since.IsZero() && atMicros < f.Since.UnixMicro(),
		!f.Until.IsZero() && atMicros >= f.Until.UnixMicro(),
		f.Actor != "" && actor != f.Actor,
		f.Action != "" && action != f.Action,
		f.Target != "" && target != f.Target,
		f.ThroughSeq > 0 && seq > f.ThroughSeq:
		return false
	}
	return true
}

// Cursor marks a position in the newest-first listing: the next page holds
// rows with a smaller seq.
type Cursor struct {
	Seq int64
}

// String encodes c as the token `audit list --after` takes: the seq itself,
// so that a person can also start a listing anywhere.
func (c Cursor) String() string { return strconv.FormatInt(c.Seq, 10) }

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(token string) (Cursor, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(token), 10, 64)
	if err != nil || n <= 0 {
		return Cursor{}, fmt.Errorf("invalid cursor %q: use the seq `audit list` printed after \"next page:\"", token)
	}
	return Cursor{Seq: n}, nil
}

// Page is one page of a listing.
type Page struct {
	Rows []Row
	// Next continues the listing; nil on the last page.
	Next *Cursor
}

// List returns up to limit rows matching f, newest (highest seq) first,
// starting after the cursor when one is given. It pages by keyset on seq, so
// a page deep in a large trail costs what the first page costs.
//
// List does not write an audit row itself: the caller knows the actor and
// records `audit.list`.
func List(ctx context.Context, pool *pgxpool.Pool, f Filter, after *Cursor, limit int) (Page, error) {
	if limit <= 0 {
		return Page{}, fmt.Errorf("audit list: limit %d: want a positive page size", limit)
	}
	// One row more than asked tells whether a next page exists.
	out, err := newPostgresTrail(pool).AuditList(ctx, auditListParams{Filter: f, After: after, Limit: limit + 1})
	if err != nil {
		return Page{}, fmt.Errorf("audit list: %w", err)
	}
	var page Page
	if len(out) > limit {
		out = out[:limit]
		page.Next = &Cursor{Seq: out[len(out)-1].Seq}
	}
	page.Rows = out
	return page, nil
}
