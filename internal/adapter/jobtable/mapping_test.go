package jobtable_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

// TestTheDocumentedMappingAndGrantsAreTheDrivers: docs/jobtable.md's
// example mapping parses to the mapping the tests use, and its GRANT
// statements are GrantSQL's, so that the page cannot drift.
func TestTheDocumentedMappingAndGrantsAreTheDrivers(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/jobtable.md")
	if err != nil {
		t.Fatal(err)
	}
	example := block(t, string(doc), "```json\n")
	m, err := jobtable.ParseMapping([]byte(example))
	if err != nil {
		t.Fatalf("ParseMapping of the documented example: %v", err)
	}
	if !reflect.DeepEqual(m, reservationMapping()) {
		t.Errorf("the documented example is %+v, the tests' mapping %+v", m, reservationMapping())
	}
	grants, _ := jobtable.GrantSQL(m, "expiry_jobs_rw")
	if documented := block(t, string(doc), "```sql\nGRANT"); "GRANT"+documented != strings.Join(grants, "\n") {
		t.Errorf("docs/jobtable.md shows the grants\nGRANT%s\nGrantSQL says\n%s", documented, strings.Join(grants, "\n"))
	}
	if _, err := jobtable.ParseMapping([]byte(strings.Replace(example, `"failed_at"`, `"failed_on"`, 1))); err == nil {
		t.Error("a misspelt column role was accepted (and its column silently dropped)")
	}
}

// block is the text after the first start in doc up to the fence that
// closes it.
func block(t *testing.T, doc, start string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, start)
	if !ok {
		t.Fatalf("docs/jobtable.md has no block beginning %q", start)
	}
	text, _, _ := strings.Cut(rest, "\n```")
	return text
}

// TestCheckRefusesHostileIdentifiers: a name in a mapping is a plain
// identifier or the mapping is refused, before any SQL is built.
func TestCheckRefusesHostileIdentifiers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(m *jobtable.Mapping)
		want   string
	}{
		{"statement in the table", func(m *jobtable.Mapping) { m.Table = "public.jobs; DROP TABLE jobs" }, "not a plain identifier"},
		{"dot in the statement", func(m *jobtable.Mapping) { m.Table = "public.jobs; DROP TABLE public.jobs" }, "not SCHEMA.TABLE"},
		{"quote in the table", func(m *jobtable.Mapping) { m.Table = `public."jobs"` }, "not a plain identifier"},
		{"no schema", func(m *jobtable.Mapping) { m.Table = "reservation_expiry_jobs" }, "schema is required"},
		{"three parts", func(m *jobtable.Mapping) { m.Table = "db.public.jobs" }, "not SCHEMA.TABLE"},
		{"empty schema", func(m *jobtable.Mapping) { m.Table = ".jobs" }, "empty name"},
		{"injection in a column", func(m *jobtable.Mapping) { m.Columns.ID = "id) OR 1=1 --" }, "columns.id"},
		{"quote in a column", func(m *jobtable.Mapping) { m.Columns.Payload = `payload", "worker_host` }, "columns.payload"},
		{"cast in a column", func(m *jobtable.Mapping) { m.Columns.Status = "status::text" }, "columns.status"},
		{"expression as native", func(m *jobtable.Mapping) { m.Columns.Native = []string{"pg_read_file('/etc/passwd')"} }, "columns.native"},
		{"newline", func(m *jobtable.Mapping) { m.Columns.DueAt = "run_at\n" }, "columns.due_at"},
		{"leading digit", func(m *jobtable.Mapping) { m.Columns.Attempts = "1attempts" }, "columns.attempts"},
		{"too long", func(m *jobtable.Mapping) { m.Columns.Marks = strings.Repeat("m", 64) }, "63-byte"},
		{"no marks", func(m *jobtable.Mapping) { m.Columns.Marks = "" }, "columns.marks is required"},
		{"one column twice", func(m *jobtable.Mapping) { m.Columns.DueAt = "failed_at" }, "mapped as both"},
		{"no error column", func(m *jobtable.Mapping) { m.Columns.LastError = "" }, "last_error or columns.history"},
		{"native shadows the letter's own", func(m *jobtable.Mapping) { m.Columns.Native = []string{"job_id"} }, "uses \"job_id\""},
		{"no failed state", func(m *jobtable.Mapping) { m.FailedStates = nil }, "failed_states is required"},
		{"replay state failed", func(m *jobtable.Mapping) { m.ReplayState = "dead" }, "also a failed state"},
		{"NUL in a state", func(m *jobtable.Mapping) { m.FailedStates = []string{"fail\x00ed"} }, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := reservationMapping()
			tc.change(&m)
			err := m.Check()
			var mapping *jobtable.MappingError
			if !errors.As(err, &mapping) {
				t.Fatalf("Check = %v; want a *MappingError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v; want it to say %q", err, tc.want)
			}
			if _, err := jobtable.GrantSQL(m, "capture"); err == nil {
				t.Error("GrantSQL wrote statements for a refused mapping")
			}
		})
	}
	if err := reservationMapping().Check(); err != nil {
		t.Errorf("the reservation mapping: %v", err)
	}
}

// TestValidateSaysWhatIsWrongWithTheLiveTable: each way a table can
// disagree with its mapping is named, with the column's actual type.
func TestValidateSaysWhatIsWrongWithTheLiveTable(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	db.exec(t, `CREATE TYPE public.job_state AS ENUM ('queued', 'running', 'failed', 'done');
		CREATE TABLE public.odd_jobs (
			id bigint, "runAt" timestamp, payload xml, attempts numeric, status public.job_state,
			last_error text, marks json, body text, tries int, state text, done_marks jsonb);
		CREATE VIEW public.jobs_view AS SELECT * FROM public.reservation_expiry_jobs`)
	odd := jobtable.Mapping{
		Table: "public.odd_jobs",
		Columns: jobtable.Columns{ID: "id", Payload: "payload", Attempts: "attempts", LastError: "last_error",
			Status: "status", DueAt: "runat", Marks: "marks"},
		FailedStates: []string{"failed", "dead"}, ReplayState: "pending",
	}
	err := odd.Validate(context.Background(), db.Admin)
	t.Log(err)
	for _, want := range []string{
		`no column "runat" (there is "runAt": names are case-sensitive)`,
		`column "payload" is xml`,
		`column "attempts" is numeric`,
		`"dead" is not a label of the enum`,
		`"pending" is not a label`,
		`marks must be jsonb`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of odd_jobs = %v\nwant it to say %s", err, want)
		}
	}

	odd.Columns = jobtable.Columns{ID: "id", Payload: "body", Attempts: "tries", LastError: "last_error", Status: "state", DueAt: "runAt", Marks: "done_marks"}
	if err := odd.Validate(context.Background(), db.Admin); err == nil || !strings.Contains(err.Error(), "without time zone") {
		t.Errorf("a timestamp without time zone as due_at: %v", err)
	}

	for _, tc := range []struct{ table, want string }{
		{"public.no_such_jobs", "no table"},
		{"public.jobs_view", "is not a table"},
	} {
		m := reservationMapping()
		m.Table = tc.table
		if err := m.Validate(context.Background(), db.Admin); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate of %s = %v; want it to say %q", tc.table, err, tc.want)
		}
	}

	db.exec(t, `CREATE TABLE public.unkeyed_jobs (LIKE public.reservation_expiry_jobs)`)
	m := reservationMapping()
	m.Table = "public.unkeyed_jobs"
	if err := m.Validate(context.Background(), db.Admin); err == nil || !strings.Contains(err.Error(), "neither the primary key") {
		t.Errorf("Validate of a table whose id is not unique = %v", err)
	}

	if err := reservationMapping().Validate(context.Background(), db.Admin); err != nil {
		t.Errorf("Validate of the reservation table: %v", err)
	}
}

// TestAnEnumStatusAndHostileStateValuesAreData: status values are bound
// as parameters, so any text a team uses (quotes and all) is matched as
// data, and an enum status column works by its labels.
func TestAnEnumStatusAndHostileStateValuesAreData(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	hostile := `it's 'failed'); DROP TABLE public.reservation_expiry_jobs; --`
	db.exec(t, `CREATE TYPE public.job_state AS ENUM ('pending', 'running', 'done', 'failed', '`+strings.ReplaceAll(hostile, "'", "''")+`');
		ALTER TABLE public.reservation_expiry_jobs ALTER COLUMN status DROP DEFAULT,
			ALTER COLUMN status TYPE public.job_state USING status::public.job_state`)
	m := db.Mapping
	m.FailedStates = []string{hostile}
	url, _ := db.grantedLogin(t, "enum", m)
	id := db.insert(t, job{})
	db.exec(t, `UPDATE public.reservation_expiry_jobs SET status = $1 WHERE id = $2::bigint`, hostile, id)
	db.insert(t, job{}) // failed, which this mapping does not capture

	got := receive(t, openSource(t, url, m, jobtable.SourceOptions{}), 1)[0].Message
	if got.MessageID != id || got.Native["status"] != hostile {
		t.Fatalf("captured job %s in status %q; want %s in %q", got.MessageID, got.Native["status"], id, hostile)
	}
	r := openRetrier(t, url, m)
	if err := publish(t, r, replayOf(got, 3, 30)); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if s := db.row(t, id).Status; s != "pending" {
		t.Errorf("after the replay the job is %q", s)
	}
	if depth, _, err := r.QueueDepth(context.Background(), r.QueueName()); err != nil || depth != 1 {
		t.Errorf("QueueDepth = %d, %v; want 1", depth, err)
	}
}
