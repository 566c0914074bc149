package jobtable

import (
	"fmt"
	"strings"

	"github.com/expiryctl/expiryctl/replay"
)

// The statements below are built from a checked mapping alone: every
// name through quote or tableIdent, every type from the catalog through
// the driver's own spellings, every value a parameter.

// incarnation is the SQL expression of a row's incarnation, the same in
// capture and in replay, so that a replay's check compares what capture
// read. With a failed_at column it is that time, in UTC to the
// microsecond whatever the session's TimeZone, with the attempts; without
// one (or where it is NULL) it is the attempts, a hash of the last error
// and the history, and the request and item of the replay whose marks
// the row carries, so that a job that a replay put back and that failed
// again with the same count and error is still a new failure.
func (t *table) incarnation() string {
	c := t.m.Columns
	text := func(col string) string {
		if col == "" {
			return "''"
		}
		return "coalesce(" + quote(col) + "::text, '')"
	}
	mk := quote(c.Marks)
	fallback := fmt.Sprintf(`'a' || %s || '-' || left(md5(%s || chr(31) || %s), 16) || coalesce('-r' || (%s ->> '%s') || '.' || (%s ->> '%s'), '')`,
		text(c.Attempts), text(c.LastError), text(c.History), mk, replay.HeaderReplayRequest, mk, replay.HeaderReplayItem)
	if c.FailedAt == "" {
		return fallback
	}
	fa := quote(c.FailedAt)
	return fmt.Sprintf(`CASE WHEN %s IS NULL OR NOT isfinite(%s) THEN %s
		ELSE to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '-a' || %s END`,
		fa, fa, fallback, fa, text(c.Attempts))
}

// orderTime is the time part of capture's order: failed_at, with a row
// that has none first; without a failed_at column, the same for every
// row, so that the order is the id's.
func (t *table) orderTime() string {
	if t.m.Columns.FailedAt == "" {
		return "'-infinity'::timestamptz"
	}
	return "coalesce(" + quote(t.m.Columns.FailedAt) + ", '-infinity'::timestamptz)"
}

// inFailedStates is the condition that a row is in a failed state, the
// states bound as parameter n.
func (t *table) inFailedStates(n int) string { return t.inStates(n) }

// idParam is parameter n, given as text, as the id column's type.
func (t *table) idParam(n int) string { return fmt.Sprintf("$%d::text::%s", n, t.idType) }

// keysPage reads the keys of one page of failed rows in capture's order:
// $1 the failed states, $2 the page's size, and when after is set, after
// the key ($3, $4). Keys alone, so that a poll that finds nothing new
// does not read every failed row's payload again.
func (t *table) keysPage(after bool) string {
	id := quote(t.m.Columns.ID)
	where := t.inFailedStates(1)
	if after {
		where += fmt.Sprintf(" AND (%s, %s) > ($3, %s)", t.orderTime(), id, t.idParam(4))
	}
	return fmt.Sprintf(`SELECT %s::text, %s, %s FROM %s WHERE %s ORDER BY %s, %s LIMIT $2`,
		id, t.incarnation(), t.orderTime(), t.m.tableIdent(), where, t.orderTime(), id)
}

// failedKeys reads the keys of every failed row: $1 the failed states.
func (t *table) failedKeys() string {
	return fmt.Sprintf(`SELECT %s::text, %s FROM %s WHERE %s`,
		quote(t.m.Columns.ID), t.incarnation(), t.m.tableIdent(), t.inFailedStates(1))
}

// rowColumns is what capture reads of a row, in scanRow's order.
func (t *table) rowColumns() string {
	c := t.m.Columns
	or := func(col, cast string) string {
		if col == "" {
			return "NULL::" + cast
		}
		return quote(col) + "::" + cast
	}
	payload := quote(c.Payload) + "::text"
	if t.payloadBytes {
		payload = quote(c.Payload)
	}
	cols := []string{
		quote(c.ID) + "::text", payload, quote(c.Attempts) + "::bigint", or(c.LastError, "text"), or(c.History, "text"),
		quote(c.Status) + "::text", quote(c.DueAt), or(c.FailedAt, "timestamptz"), quote(c.Marks) + "::text",
		or(c.Kind, "text"), t.incarnation(),
	}
	for _, n := range c.Native {
		cols = append(cols, quote(n)+"::text")
	}
	return strings.Join(cols, ", ")
}

// rowsByID reads the whole rows of ids that are still failed: $1 the ids
// as text, $2 the failed states.
func (t *table) rowsByID() string {
	return fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ANY($1::text[]::%s[]) AND %s`,
		t.rowColumns(), t.m.tableIdent(), quote(t.m.Columns.ID), t.idType, t.inFailedStates(2))
}

// lockRow locks the row $1 for a replay and reads what decides it.
func (t *table) lockRow() string {
	c := t.m.Columns
	return fmt.Sprintf(`SELECT %s::text, %s, %s::text FROM %s WHERE %s = %s FOR UPDATE`,
		quote(c.Status), t.incarnation(), quote(c.Marks), t.m.tableIdent(), quote(c.ID), t.idParam(1))
}

// replayRow puts row $1 back: status $2, due now, marks $3.
func (t *table) replayRow() string {
	c := t.m.Columns
	set := fmt.Sprintf("%s = $2::text::%s, %s = now(), %s = $3::jsonb", quote(c.Status), t.statusType, quote(c.DueAt), quote(c.Marks))
	if t.m.ResetAttempts {
		set += ", " + quote(c.Attempts) + " = 0"
	}
	return fmt.Sprintf(`UPDATE %s SET %s WHERE %s = %s`, t.m.tableIdent(), set, quote(c.ID), t.idParam(1))
}

// runnable counts the rows in the replay's state that are due: $1 the
// state.
func (t *table) runnable() string {
	c := t.m.Columns
	return fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s = $1::text::%s AND %s <= now()`,
		t.m.tableIdent(), quote(c.Status), t.statusType, quote(c.DueAt))
}

// topology counts the rows of the work: $1 the replay state, $2 it and
// the failed states (so that an index on the status column serves the
// read). Rows in the replay state are ready once due and scheduled
// before; rows in a failed state are isolated. The ages are those of the
// oldest ready row since it became due and, with a failed_at column, of
// the oldest failed row since it failed, in seconds by the database's
// clock; an infinite time is no age. A row in the replay state with no
// due time is neither ready nor scheduled: no poller's due-time
// condition picks it up.
func (t *table) topology() string {
	c := t.m.Columns
	failedAt := "NULL::timestamptz"
	if c.FailedAt != "" {
		failedAt = quote(c.FailedAt)
	}
	return fmt.Sprintf(`SELECT
		count(*) FILTER (WHERE replay AND due <= now()),
		extract(epoch FROM now() - min(due) FILTER (WHERE replay AND due <= now() AND isfinite(due)))::float8,
		count(*) FILTER (WHERE replay AND due > now()),
		count(*) FILTER (WHERE NOT replay),
		extract(epoch FROM now() - min(failed_at) FILTER (WHERE NOT replay AND isfinite(failed_at)))::float8
	FROM (SELECT %s = $1::text::%s AS replay, %s AS due, %s AS failed_at
		FROM %s WHERE %s) AS j`,
		quote(c.Status), t.statusType, quote(c.DueAt), failedAt, t.m.tableIdent(), t.inStates(2))
}

// inStates is the condition that a row's status is one of parameter n.
func (t *table) inStates(n int) string {
	return fmt.Sprintf("%s = ANY($%d::text[]::%s[])", quote(t.m.Columns.Status), n, t.statusType)
}

// GrantSQL is the GRANT statements a DBA runs so that login can both
// capture and replay through m, and nothing more: USAGE on the schema,
// SELECT on the mapped columns alone, UPDATE on the status, due time and
// marks columns (and attempts when a replay resets them). A login that
// only captures needs the first two statements. The database's CONNECT
// is not among them: PUBLIC holds it unless the DBA took it away.
func GrantSQL(m Mapping, login string) ([]string, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	if login == "" {
		return nil, fmt.Errorf("GrantSQL: no login named")
	}
	schema, _ := m.schemaTable()
	role := quote(login)
	cols := func(names []string) string {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = quote(n)
		}
		return strings.Join(quoted, ", ")
	}
	return []string{
		fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", quote(schema), role),
		fmt.Sprintf("GRANT SELECT (%s) ON TABLE %s TO %s;", cols(m.selected()), m.tableIdent(), role),
		fmt.Sprintf("GRANT UPDATE (%s) ON TABLE %s TO %s;", cols(m.updated()), m.tableIdent(), role),
	}, nil
}
