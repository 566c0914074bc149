package jobtable_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func TestGrantSQLNamesTheMappedColumnsAlone(t *testing.T) {
	t.Parallel()
	got, err := jobtable.GrantSQL(reservationMapping(), "expiry-capture")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`GRANT USAGE ON SCHEMA "public" TO "expiry-capture";`,
		`GRANT SELECT ("id", "payload", "attempt_count", "last_error", "status", "run_at", "failed_at", "expiryctl_marks", "reservation_id", "hold_until", "idempotency_key") ON TABLE "public"."reservation_expiry_jobs" TO "expiry-capture";`,
		`GRANT UPDATE ("status", "run_at", "expiryctl_marks") ON TABLE "public"."reservation_expiry_jobs" TO "expiry-capture";`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("GrantSQL =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m := reservationMapping()
	m.ResetAttempts = true
	got, _ = jobtable.GrantSQL(m, `o"brien`)
	if !strings.Contains(got[2], `"attempt_count") ON TABLE`) || !strings.Contains(got[2], `TO "o""brien";`) {
		t.Errorf("with attempts reset, and a login that needs quoting: %s", got[2])
	}
}

// TestAGrantedLoginNeedsNoMore: the conformance suites run as a login
// granted GrantSQL's statements alone; this checks that such a login
// truly holds no more (it cannot read a column outside the mapping, nor
// write one a replay does not set), and that a login short of a grant is
// refused when the driver opens, naming what it lacks, rather than
// failing every item of a run.
func TestAGrantedLoginNeedsNoMore(t *testing.T) {
	t.Parallel()
	db := newJobsDB(t, "jsonb")
	id := db.insert(t, job{})
	ctx := context.Background()

	login := pgtest.Connect(t, db.URL)
	for _, sql := range []string{
		`SELECT worker_host FROM public.reservation_expiry_jobs`,
		`UPDATE public.reservation_expiry_jobs SET payload = '{}'`,
		`UPDATE public.reservation_expiry_jobs SET attempt_count = 0`,
		`DELETE FROM public.reservation_expiry_jobs`,
		`INSERT INTO public.reservation_expiry_jobs (reservation_id, hold_until, idempotency_key, payload) VALUES ('r', now(), 'k', '{}')`,
	} {
		if _, err := login.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the driver's login ran %s: %v", sql, err)
		}
	}
	letter := capture(t, db, 1)[id]
	if err := publish(t, openRetrier(t, db.URL, db.Mapping), replayOf(letter, 1, 1)); err != nil {
		t.Errorf("replay as the granted login: %v", err)
	}

	// A capture-only login: the first two statements.
	grants, _ := jobtable.GrantSQL(db.Mapping, "x")
	reader := db.newLogin(t, "reader")
	for _, g := range grants[:2] {
		db.exec(t, strings.Replace(g, `TO "x"`, "TO "+pgx.Identifier{reader.Name}.Sanitize(), 1))
	}
	openSource(t, reader.URL, db.Mapping, jobtable.SourceOptions{})
	_, err := jobtable.OpenRetrier(ctx, tableRef(t, reader.URL, db.Mapping.Table), db.Mapping, jobtable.RetrierOptions{})
	if err == nil || !strings.Contains(err.Error(), `UPDATE on column "status"`) || !strings.Contains(err.Error(), "GRANT UPDATE") {
		t.Errorf("OpenRetrier as a capture-only login: %v; want it to name the missing UPDATE and the grant", err)
	}

	// A login short of one column's SELECT.
	short := db.newLogin(t, "short")
	for _, g := range grants {
		g = strings.Replace(g, `, "idempotency_key"`, "", 1)
		db.exec(t, strings.Replace(g, `TO "x"`, "TO "+pgx.Identifier{short.Name}.Sanitize(), 1))
	}
	_, err = jobtable.OpenSource(ctx, tableRef(t, short.URL, db.Mapping.Table), db.Mapping, jobtable.SourceOptions{})
	if err == nil || !strings.Contains(err.Error(), `SELECT on column "idempotency_key"`) {
		t.Errorf("OpenSource short of a column: %v", err)
	}
	t.Log(err)
}
