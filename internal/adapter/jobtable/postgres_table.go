package jobtable

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Querier is what Validate reads the catalog through: a *pgxpool.Pool,
// a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Validate checks the mapping (Check), then that its table exists in the
// database q reaches and that every mapped column is there with a type
// the driver reads and writes correctly, that the id is the table's key,
// and that an enum status knows the mapping's states. Each problem is
// named with the column's actual type. It reads the catalog
// (pg_catalog, which shows every column whatever the login's privileges,
// where information_schema hides the columns a login cannot read and
// would report a missing grant as a missing column); it does not check
// the login's privileges, which OpenSource and OpenRetrier do for their
// own.
func (m Mapping) Validate(ctx context.Context, q Querier) error {
	_, err := inspect(ctx, q, m)
	return err
}

// column is one column of the live table as the catalog describes it.
type column struct {
	name string
	// typ is pg_type.typname (int8, jsonb, …); kind its typtype ('b'
	// base, 'e' enum, 'd' domain, …); shown is format_type's spelling.
	typ, kind, typSchema, shown string
	canSelect, canUpdate        bool
	labels                      []string // an enum's
}

// table is a mapping checked against its live table, with the SQL
// fragments that depend on the columns' types.
type table struct {
	m    Mapping
	cols map[string]column
	// login is the session's login; standing the ways it holds around
	// the table's own rules (store.RelationStanding).
	login    string
	standing []string
	// idType and statusType are what a text parameter is cast to before
	// it meets the id or the status column, so that the column's own
	// index and equality serve the comparison.
	idType, statusType string
	payloadBytes       bool
	schemaUsage        bool
}

// roleTypes are the column types the driver accepts for each role, by
// pg_type.typname. Anything else is refused with why.
var roleTypes = map[string][]string{
	"id":         {"int2", "int4", "int8", "text", "varchar", "uuid"},
	"payload":    {"jsonb", "json", "text", "varchar", "bytea"},
	"attempts":   {"int2", "int4", "int8"},
	"last_error": {"text", "varchar"},
	"history":    {"jsonb", "json"},
	"status":     {"text", "varchar"}, // and enums
	"due_at":     {"timestamptz"},
	"failed_at":  {"timestamptz"},
	"marks":      {"jsonb"},
	"kind":       {"text", "varchar"},
}

// sqlTypes spell the id types a parameter is cast to.
var sqlTypes = map[string]string{"int2": "smallint", "int4": "integer", "int8": "bigint", "text": "text", "varchar": "text", "uuid": "uuid"}

func inspect(ctx context.Context, q Querier, m Mapping) (*table, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	schema, name := m.schemaTable()
	rows, err := q.Query(ctx, `SELECT c.relkind::text, has_schema_privilege(c.relnamespace, 'USAGE'),
			a.attname::text, t.typname::text, t.typtype::text, tn.nspname::text, format_type(a.atttypid, a.atttypmod),
			has_column_privilege(c.oid, a.attnum, 'SELECT'), has_column_privilege(c.oid, a.attnum, 'UPDATE'),
			CASE WHEN t.typtype = 'e' THEN ARRAY(SELECT enumlabel::text FROM pg_enum WHERE enumtypid = t.oid ORDER BY enumsortorder) END
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		LEFT JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_namespace tn ON tn.oid = t.typnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, name)
	if err != nil {
		return nil, fmt.Errorf("read the catalog for %s: %w", m.Table, err)
	}
	tab := &table{m: m, cols: map[string]column{}}
	var relkind string
	found := false
	for rows.Next() {
		var c column
		var attname, typ, kind, typSchema, shown *string
		var canSelect, canUpdate *bool
		if err := rows.Scan(&relkind, &tab.schemaUsage, &attname, &typ, &kind, &typSchema, &shown, &canSelect, &canUpdate, &c.labels); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the catalog for %s: %w", m.Table, err)
		}
		found = true
		if attname == nil {
			continue
		}
		c.name, c.typ, c.kind, c.typSchema, c.shown = *attname, *typ, *kind, *typSchema, *shown
		c.canSelect, c.canUpdate = *canSelect, *canUpdate
		tab.cols[c.name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the catalog for %s: %w", m.Table, err)
	}
	if !found {
		return nil, &MappingError{Table: m.Table, Missing: true, Problems: []string{fmt.Sprintf(
			"no table %s in this database (names are case-sensitive: a table created unquoted is lower case)", m.tableIdent())}}
	}
	if relkind != "r" && relkind != "p" {
		return nil, &MappingError{Table: m.Table, Problems: []string{fmt.Sprintf(
			"%s is not a table (pg_class.relkind %q): a replay locks and updates rows, which a view or foreign table may not do as a table does", m.tableIdent(), relkind)}}
	}

	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	c := m.Columns
	for _, r := range []struct{ role, name string }{
		{"id", c.ID}, {"payload", c.Payload}, {"attempts", c.Attempts}, {"last_error", c.LastError},
		{"history", c.History}, {"status", c.Status}, {"due_at", c.DueAt}, {"failed_at", c.FailedAt},
		{"marks", c.Marks}, {"kind", c.Kind},
	} {
		if r.name == "" {
			continue
		}
		col, ok := tab.cols[r.name]
		if !ok {
			add("columns.%s: %s has no column %q%s", r.role, m.tableIdent(), r.name, nearName(tab.cols, r.name))
			continue
		}
		if r.role == "status" && col.kind == "e" {
			continue
		}
		if !slices.Contains(roleTypes[r.role], col.typ) {
			add("columns.%s: column %q is %s; %s", r.role, r.name, col.shown, typeAdvice(r.role, col))
		}
	}
	for _, n := range c.Native {
		if _, ok := tab.cols[n]; !ok {
			add("columns.native: %s has no column %q%s", m.tableIdent(), n, nearName(tab.cols, n))
		}
	}
	if id, ok := tab.cols[c.ID]; ok {
		tab.idType = sqlTypes[id.typ]
	}
	if p, ok := tab.cols[c.Payload]; ok {
		tab.payloadBytes = p.typ == "bytea"
	}
	if st, ok := tab.cols[c.Status]; ok {
		tab.statusType = "text"
		if st.kind == "e" {
			tab.statusType = pgx.Identifier{st.typSchema, st.typ}.Sanitize()
			for _, s := range append(slices.Clone(m.FailedStates), m.ReplayState) {
				if !slices.Contains(st.labels, s) {
					add("status value %q is not a label of the enum %s of column %q (its labels: %s)", s, st.shown, c.Status, strings.Join(st.labels, ", "))
				}
			}
		}
	}
	if len(problems) == 0 {
		unique, err := idIsKey(ctx, q, m)
		if err != nil {
			return nil, err
		}
		if !unique {
			add("columns.id: column %q is neither the primary key nor alone in a unique index without a predicate: a replay locks one row by it, and could lock and change several", c.ID)
		}
	}
	if len(problems) > 0 {
		return nil, &MappingError{Table: m.Table, Problems: problems}
	}
	return tab, nil
}

// idIsKey says whether the id column alone is unique in the table.
func idIsKey(ctx context.Context, q Querier, m Mapping) (bool, error) {
	schema, name := m.schemaTable()
	rows, err := q.Query(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = $3
		  AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL)`, schema, name, m.Columns.ID)
	if err != nil {
		return false, fmt.Errorf("read the indexes of %s: %w", m.Table, err)
	}
	unique, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
	if err != nil {
		return false, fmt.Errorf("read the indexes of %s: %w", m.Table, err)
	}
	return unique, nil
}

// typeAdvice says what a column of the wrong type should be.
func typeAdvice(role string, col column) string {
	switch {
	case col.typ == "timestamp" && (role == "due_at" || role == "failed_at"):
		return "timestamp without time zone names no instant until a session's TimeZone is applied, so a replay's now() could land hours from where the poller reads it; make it timestamptz (ALTER TABLE … ALTER COLUMN … TYPE timestamptz USING … AT TIME ZONE 'the zone it was written in')"
	case col.kind == "d":
		return "a domain: map a column of the domain's base type, or ask for domains to be supported"
	case role == "marks" && col.typ == "json":
		return "marks must be jsonb, which a replay compares by key (ALTER TABLE … ALTER COLUMN … TYPE jsonb)"
	case role == "status":
		return "want text, varchar or an enum"
	}
	want := make([]string, len(roleTypes[role]))
	for i, typ := range roleTypes[role] {
		want[i] = typ
		if spelt, ok := sqlTypes[typ]; ok && typ != "varchar" {
			want[i] = spelt
		}
	}
	return "want " + strings.Join(want, ", ")
}

// nearName is a hint when name differs from a column only in case, the
// usual slip with quoted camelCase columns.
func nearName(cols map[string]column, name string) string {
	for n := range cols {
		if strings.EqualFold(n, name) {
			return fmt.Sprintf(" (there is %q: names are case-sensitive)", n)
		}
	}
	return ""
}

// checkPrivileges refuses a login that lacks a privilege the statements
// of a Source (read) or a Retrier (read and write) need, naming them all
// and the GRANT that gives them.
func (t *table) checkPrivileges(login string, write bool) error {
	var missing []string
	if !t.schemaUsage {
		schema, _ := t.m.schemaTable()
		missing = append(missing, "USAGE on schema "+quote(schema))
	}
	for _, n := range t.m.selected() {
		if !t.cols[n].canSelect {
			missing = append(missing, "SELECT on column "+quote(n))
		}
	}
	if write {
		for _, n := range t.m.updated() {
			if !t.cols[n].canUpdate {
				missing = append(missing, "UPDATE on column "+quote(n))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	grants, _ := GrantSQL(t.m, login)
	if !write {
		grants = grants[:2] // a capture needs no UPDATE
	}
	return fmt.Errorf("the login %s lacks %s on %s; a DBA grants what the driver needs with:\n  %s",
		quote(login), strings.Join(missing, ", "), t.m.tableIdent(), strings.Join(grants, "\n  "))
}
