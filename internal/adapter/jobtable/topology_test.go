package jobtable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
)

// topology reads the topology of m's table as the login at url, failing
// t on an error or an unavailable report.
func topology(t *testing.T, url string, m jobtable.Mapping) deadletter.QueueReport {
	t.Helper()
	report, err := jobtable.Topology(context.Background(), tableRef(t, url, m.Table), m)
	if err != nil || report.Unavailable != "" {
		t.Fatalf("Topology: %+v, %v", report, err)
	}
	return report
}

// within fails t unless got is want or up to 30 s more.
func within(t *testing.T, what string, got *time.Duration, want time.Duration) {
	t.Helper()
	if got == nil || *got < want || *got > want+30*time.Second {
		t.Errorf("%s head age %v; want %s (and less than 30 s more)", what, got, want)
	}
}

// TestTopologyCountsTheTablesWork: rows in the replay state that are due
// are ready, the oldest due giving the head age; those due later are
// scheduled; rows in the failed states are isolated, the oldest failure
// giving the dead-letter head age; rows in other states are not counted.
// The driver's login, granted GrantSQL's statements alone, reads it, and
// so does a capture-only login; nothing is written.
func TestTopologyCountsTheTablesWork(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	now := time.Now()
	db.insert(t, job{Status: "pending", RunAt: now.Add(-90 * time.Second)})
	db.insert(t, job{Status: "pending", RunAt: now.Add(-10 * time.Second)})
	db.insert(t, job{Status: "pending", RunAt: now.Add(time.Hour)})
	db.insert(t, job{Status: "pending", RunAt: now.Add(2 * time.Hour)})
	db.insert(t, job{Status: "failed", FailedAt: now.Add(-2 * time.Hour), RunAt: now.Add(-3 * time.Hour)})
	db.insert(t, job{Status: "failed", FailedAt: now.Add(-time.Minute)})
	db.insert(t, job{Status: "dead", Attempts: 5, LastError: "x", FailedAt: now.Add(-30 * time.Minute)})
	db.insert(t, job{Status: "done", RunAt: now.Add(-5 * time.Hour)})
	db.insert(t, job{Status: "running", RunAt: now.Add(-5 * time.Hour)})
	before := db.digest(t)

	report := topology(t, db.URL, db.Mapping)
	s := report.States()
	if s.Ready != 2 || s.Scheduled != 2 || s.Isolated != 3 || s.InFlight != 0 || s.Consumers != 0 {
		t.Errorf("states %+v; want 2 ready, 2 scheduled, 3 isolated", s)
	}
	within(t, "ready", s.ReadyHeadAge, 90*time.Second)
	within(t, "isolated", s.IsolatedHeadAge, 2*time.Hour)
	name := tableRef(t, db.URL, db.Mapping.Table).Name()
	for _, q := range report.Queues {
		if !strings.HasPrefix(q.Name, name) {
			t.Errorf("queue %q is not named after the table %s", q.Name, name)
		}
		if q.Role == deadletter.RoleDeadLetter && q.Name != name+" (dead, failed)" {
			t.Errorf("the dead-letter line is %q; want the failed states named", q.Name)
		}
	}

	grants, _ := jobtable.GrantSQL(db.Mapping, "x")
	reader := db.newLogin(t, "reader")
	for _, g := range grants[:2] {
		db.exec(t, strings.Replace(g, `TO "x"`, "TO "+pgx.Identifier{reader.Name}.Sanitize(), 1))
	}
	if got := topology(t, reader.URL, db.Mapping).States(); got.Ready != s.Ready || got.Isolated != s.Isolated {
		t.Errorf("as a capture-only login: %+v; want what the driver's login read", got)
	}
	if after := db.digest(t); after != before {
		t.Error("reading the topology changed the table")
	}
}

// TestTopologyOfAnEnumStatusAndNoFailedAt: an enum status is compared as
// its type; without a failed_at column the failed rows have no age; an
// infinite due time is counted but is no age; a table with nothing in it
// reads as zeros.
func TestTopologyOfAnEnumStatusAndNoFailedAt(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	db.exec(t, `CREATE TYPE public.job_status AS ENUM ('queued', 'running', 'failed', 'done');
		CREATE TABLE public.enum_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL, attempts int NOT NULL DEFAULT 0,
			last_error text, status public.job_status NOT NULL, run_at timestamptz NOT NULL, marks jsonb)`)
	m := jobtable.Mapping{
		Table: "public.enum_jobs",
		Columns: jobtable.Columns{ID: "id", Payload: "payload", Attempts: "attempts", LastError: "last_error",
			Status: "status", DueAt: "run_at", Marks: "marks"},
		FailedStates: []string{"failed"}, ReplayState: "queued",
	}
	url, _ := db.grantedLogin(t, "enum", m)
	if s := topology(t, url, m).States(); s.Ready+s.Scheduled+s.Isolated != 0 || s.ReadyHeadAge != nil || s.IsolatedHeadAge != nil {
		t.Errorf("an empty table: %+v", s)
	}
	db.exec(t, `INSERT INTO public.enum_jobs (payload, status, run_at) VALUES
		('{}', 'queued', now() - interval '1 minute'), ('{}', 'queued', '-infinity'), ('{}', 'queued', 'infinity'),
		('{}', 'failed', now()), ('{}', 'running', now() - interval '1 hour')`)
	s := topology(t, url, m).States()
	if s.Ready != 2 || s.Scheduled != 1 || s.Isolated != 1 {
		t.Errorf("states %+v; want 2 ready (one due at -infinity), 1 scheduled, 1 isolated", s)
	}
	within(t, "ready", s.ReadyHeadAge, time.Minute)
	if s.IsolatedHeadAge != nil {
		t.Errorf("an isolated head age %v with no failed_at column", *s.IsolatedHeadAge)
	}
}

// TestTopologyRefusesATableThatIsNotThere: a *MappingError, its text as
// Unavailable; a login short of a grant, and a database that does not
// answer, are only unavailable.
func TestTopologyRefusesATableThatIsNotThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newJobsDB(t, "jsonb")
	m := db.Mapping
	m.Table = "public.reservation_expiry_jobz"
	report, err := jobtable.Topology(ctx, tableRef(t, db.URL, m.Table), m)
	var mapping *jobtable.MappingError
	if !errors.As(err, &mapping) || report.Unavailable != err.Error() || !strings.Contains(err.Error(), "no table") {
		t.Errorf("Topology of a table that is not there: %+v, %v; want a *MappingError, its text as Unavailable", report, err)
	}

	nobody := db.newLogin(t, "nobody")
	report, err = jobtable.Topology(ctx, tableRef(t, nobody.URL, db.Mapping.Table), db.Mapping)
	if err != nil || !strings.Contains(report.Unavailable, "GRANT SELECT") {
		t.Errorf("Topology as a login with no grant: %+v, %v; want Unavailable naming the grant, and no error", report, err)
	}

	report, err = jobtable.Topology(ctx, tableRef(t, "postgres://nobody@127.0.0.1:1/jobs?connect_timeout=2", db.Mapping.Table), db.Mapping)
	if err != nil || report.Unavailable == "" || len(report.Queues) != 0 {
		t.Errorf("Topology of a database nobody answers for: %+v, %v; want Unavailable and no error", report, err)
	}
}
