package jobtable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Mapping says where a team's jobs table keeps what expiryctl reads and
// writes: the table, its columns, the states a failed row is in and the
// state a replay puts it back in. Nothing else of the table is read or
// written, and a login needs privileges on these columns alone
// (GrantSQL). Its JSON form is what a team proposes and a second person
// approves; ParseMapping reads it and Check and Validate refuse what is
// wrong, saying what.
//
// Names are PostgreSQL identifiers as the catalog holds them, case and
// all: a column created unquoted as RunAt is runat, one created as
// "runAt" is runAt. They are always quoted in SQL, never spliced.
type Mapping struct {
	// Table is SCHEMA.TABLE. The schema is required: a name resolved by
	// a login's search_path could reach another table than the one
	// approved.
	Table string `json:"table"`
	// Columns names the table's columns.
	Columns Columns `json:"columns"`
	// FailedStates are the status values of a row that failed for good,
	// such as "failed" or "dead": the rows a Source captures and a
	// Retrier may put back.
	FailedStates []string `json:"failed_states"`
	// ReplayState is the status a replay sets, the one the team's poller
	// picks up, such as "pending". It is not one of FailedStates.
	ReplayState string `json:"replay_state"`
	// ResetAttempts, when true, has a replay set the attempts column to
	// 0, so that a poller that gives up after a budget of attempts gives
	// the replayed job the whole budget again. Default false: attempts
	// are kept, and a poller that checks its budget before it runs a
	// job may fail the replay at once without running it; the login then
	// needs no UPDATE on attempts.
	ResetAttempts bool `json:"reset_attempts,omitempty"`
}

// Columns names a jobs table's columns. ID, Payload, Attempts, Status,
// DueAt and Marks are required, and one of LastError and History.
type Columns struct {
	// ID is the row's key: a single-column primary key or unique index
	// of type smallint, integer, bigint, text, varchar or uuid.
	ID string `json:"id"`
	// Payload is the job's message: jsonb, json, text, varchar or bytea.
	// A letter's payload is the column's bytes as stored: bytea byte for
	// byte, json and text as written, jsonb in PostgreSQL's text form of
	// it (jsonb keeps no input bytes).
	Payload string `json:"payload"`
	// Attempts is how many times the job ran: smallint, integer or bigint.
	Attempts string `json:"attempts"`
	// LastError is the last failure's text (text or varchar).
	LastError string `json:"last_error,omitempty"`
	// History, optional, is a json or jsonb array of the attempts,
	// oldest first: each an object with an error (or message), and
	// optionally at (or time), attempt and trace, or a bare string.
	History string `json:"history,omitempty"`
	// Status is the job's state: text, varchar or an enum.
	Status string `json:"status"`
	// DueAt is when the poller runs the job next (timestamptz); a replay
	// sets it to the time of the replay.
	DueAt string `json:"due_at"`
	// FailedAt, optional, is when the job failed (or was last updated),
	// timestamptz. With Attempts it is the failure's incarnation, and
	// the letter's time of failure. Without it a failure is told from
	// the next by attempts, the last error and the marks of the replay
	// before it (see the package's docs/jobtable.md), and the letter's
	// time is when it was captured.
	FailedAt string `json:"failed_at,omitempty"`
	// Marks is a jsonb column, NULL until a replay writes there the
	// x-replay-* headers naming its request and item. It is required:
	// it is how a replay that resumes after a lost commit knows that
	// its earlier publish of the same item already put the job back,
	// and confirms it rather than skipping it or, where the job has
	// failed again unchanged, retrying it twice; and it is how a job
	// that dies again after a replay links to that replay.
	Marks string `json:"marks"`
	// Kind, optional, is the job's kind or type (text or varchar).
	Kind string `json:"kind,omitempty"`
	// Native are more columns a letter keeps as the table's own, as
	// text (JSON for json and jsonb), such as reservation_id or
	// idempotency_key. Status and DueAt are kept so too.
	Native []string `json:"native,omitempty"`
}

// maxIdentifier is PostgreSQL's NAMEDATALEN less one: a longer name is
// cut short by the server, and would then name another column.
const maxIdentifier = 63

// ParseMapping reads a Mapping's JSON form and checks it (Check). A
// field it does not know is an error, so that a misspelt optional
// column is not silently dropped.
func ParseMapping(data []byte) (Mapping, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Mapping
	if err := dec.Decode(&m); err != nil {
		return Mapping{}, fmt.Errorf("read the jobs table mapping: %w", err)
	}
	if dec.More() {
		return Mapping{}, errors.New("read the jobs table mapping: more than one JSON value")
	}
	if err := m.Check(); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

// Check refuses a mapping that no table could satisfy, without a
// database: a name that is not a plain identifier, a required column
// missing, one column mapped twice, a state that is empty or both failed
// and the replay's. Validate checks it against the live table too. Every
// problem is named, not only the first.
func (m Mapping) Check() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	schema, table, ok := strings.Cut(m.Table, ".")
	switch {
	case m.Table == "":
		add("table is required, as SCHEMA.TABLE")
	case !ok:
		add("table %q is not SCHEMA.TABLE: the schema is required, so that no search_path decides which table it is", m.Table)
	case strings.Contains(table, "."):
		add("table %q is not SCHEMA.TABLE: one dot between two plain identifiers", m.Table)
	default:
		if err := checkIdentifier(schema); err != nil {
			add("table's schema: %v", err)
		}
		if err := checkIdentifier(table); err != nil {
			add("table: %v", err)
		}
	}

	c := m.Columns
	roles := []struct {
		role, name string
		required   bool
	}{
		{"id", c.ID, true}, {"payload", c.Payload, true}, {"attempts", c.Attempts, true},
		{"last_error", c.LastError, false}, {"history", c.History, false},
		{"status", c.Status, true}, {"due_at", c.DueAt, true}, {"failed_at", c.FailedAt, false},
		{"marks", c.Marks, true}, {"kind", c.Kind, false},
	}
	for _, n := range c.Native {
		roles = append(roles, struct {
			role, name string
			required   bool
		}{"native", n, true})
	}
	mappedAs := map[string]string{}
	for _, r := range roles {
		if r.name == "" {
			if r.required {
				if r.role == "marks" {
					add("columns.marks is required: without a column for the replay's marks, a resumed replay could not tell its own earlier retry of a job from someone else's (add one with ALTER TABLE … ADD COLUMN expiryctl_marks jsonb)")
				} else {
					add("columns.%s is required", r.role)
				}
			}
			continue
		}
		if err := checkIdentifier(r.name); err != nil {
			add("columns.%s: %v", r.role, err)
			continue
		}
		if was, dup := mappedAs[r.name]; dup {
			add("column %q is mapped as both %s and %s", r.name, was, r.role)
			continue
		}
		mappedAs[r.name] = r.role
	}
	if c.LastError == "" && c.History == "" {
		add("columns.last_error or columns.history is required: a letter must say why the job failed")
	}
	for _, n := range append([]string{c.Status, c.DueAt}, c.Native...) {
		if slices.Contains(reservedNative, n) {
			add("column %q cannot be kept under its own name: a letter uses %q for itself", n, n)
		}
	}

	if len(m.FailedStates) == 0 {
		add("failed_states is required: the status values of a job that failed for good")
	}
	for _, s := range m.FailedStates {
		if err := checkState(s); err != nil {
			add("failed_states: %v", err)
		}
	}
	if err := checkState(m.ReplayState); err != nil {
		add("replay_state: %v", err)
	} else if slices.Contains(m.FailedStates, m.ReplayState) {
		add("replay_state %q is also a failed state: a replay would leave the job failed", m.ReplayState)
	}

	if len(problems) > 0 {
		return &MappingError{Table: m.Table, Problems: problems}
	}
	return nil
}

// reservedNative are the keys a job-store letter's native map holds for
// itself (deadletter.StoredJob.Message), which no column may shadow.
var reservedNative = []string{deadletter.NativeJobID, deadletter.NativeIncarnation, deadletter.NativeKind, deadletter.NativeMaxAttempts}

// checkIdentifier admits a plain identifier alone: a letter or
// underscore, then letters, digits, underscores or dollars, at most 63
// bytes. Quoting would make any name safe in SQL, but a name with quotes,
// dots, spaces or control characters in a mapping is far likelier an
// attempt on the statements, or a copy-paste slip, than a real column,
// and a person approving the mapping should not have to read one.
func checkIdentifier(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > maxIdentifier {
		return fmt.Errorf("%q is longer than PostgreSQL's 63-byte names", name)
	}
	for i, r := range name {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if letter || (i > 0 && (r == '$' || (r >= '0' && r <= '9'))) {
			continue
		}
		return fmt.Errorf("%q is not a plain identifier (a letter or _, then letters, digits, _ or $): %q at byte %d", name, r, i)
	}
	return nil
}

// checkState admits any status value PostgreSQL's text can hold, and no
// empty one.
func checkState(s string) error {
	switch {
	case s == "":
		return errors.New("empty status value")
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("status value %q holds a NUL byte, which no PostgreSQL text can", s)
	case len(s) > 200:
		return fmt.Errorf("status value %.20q… is longer than 200 bytes", s)
	}
	return nil
}

// MappingError is a mapping refused by Check or Validate, with every
// problem found.
type MappingError struct {
	Table    string
	Problems []string
	// Missing: the table does not exist, which is a missing queue
	// (deadletter.ErrQueueNotFound), not a mapping to correct.
	Missing bool
}

// Unwrap is deadletter.ErrQueueNotFound for a table that does not exist.
func (e *MappingError) Unwrap() error {
	if e.Missing {
		return deadletter.ErrQueueNotFound
	}
	return nil
}

func (e *MappingError) Error() string {
	name := e.Table
	if name == "" {
		name = "(no table)"
	}
	if len(e.Problems) == 1 {
		return fmt.Sprintf("the jobs table mapping of %s: %s", name, e.Problems[0])
	}
	return fmt.Sprintf("the jobs table mapping of %s has %d problems:\n  - %s", name, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// schemaTable is the mapping's table split, after Check.
func (m Mapping) schemaTable() (schema, table string) {
	schema, table, _ = strings.Cut(m.Table, ".")
	return schema, table
}

// tableIdent is the table quoted for SQL.
func (m Mapping) tableIdent() string {
	schema, table := m.schemaTable()
	return pgx.Identifier{schema, table}.Sanitize()
}

// quote is a column quoted for SQL.
func quote(column string) string { return pgx.Identifier{column}.Sanitize() }

// selected are the columns a Source reads, each once, in the mapping's
// order.
func (m Mapping) selected() []string {
	c := m.Columns
	var cols []string
	for _, n := range append([]string{c.ID, c.Payload, c.Attempts, c.LastError, c.History, c.Status, c.DueAt, c.FailedAt, c.Marks, c.Kind}, c.Native...) {
		if n != "" && !slices.Contains(cols, n) {
			cols = append(cols, n)
		}
	}
	return cols
}

// updated are the columns a replay writes.
func (m Mapping) updated() []string {
	cols := []string{m.Columns.Status, m.Columns.DueAt, m.Columns.Marks}
	if m.ResetAttempts {
		cols = append(cols, m.Columns.Attempts)
	}
	return cols
}
