package e2e_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/replay"
)

// reservationsReader is the reservation database's read-only login: in no
// expiryctl group, with SELECT on the reservations schema only.
func (w *replayWorld) reservationsReader(t *testing.T) *pgtest.Login {
	t.Helper()
	reader := w.db.Login(t, "reservations_ro")
	super := w.db.Superuser(t)
	t.Cleanup(func() {
		// The login is dropped when the test ends, and its grants first.
		_, _ = super.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{reader.Name}.Sanitize())
	})
	for _, sql := range []string{
		"GRANT CONNECT ON DATABASE " + pgx.Identifier{w.db.Name}.Sanitize() + " TO " + pgx.Identifier{reader.Name}.Sanitize(),
		"GRANT USAGE ON SCHEMA reservations TO " + pgx.Identifier{reader.Name}.Sanitize(),
		"GRANT SELECT ON ALL TABLES IN SCHEMA reservations TO " + pgx.Identifier{reader.Name}.Sanitize(),
	} {
		if _, err := super.Exec(withTimeout(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return reader
}

// TestReservationsTemplateEnabledWithOneCommand: an admin proposes the
// reservations template with one command, a second approves it, and a
// replay run against the reservation database through a read-only login
// (in no expiryctl group, SELECT on the reservations schema only) skips
// the reservations no longer held at their job's version, and watches each
// one it replays expire. A reservation database that refuses the login
// publishes nothing.
func TestReservationsTemplateEnabledWithOneCommand(t *testing.T) {
	t.Parallel()
	const n = 20
	w := newReplayWorld(t, n, "canary_window=300ms")
	ctx := withTimeout(t)
	ada := newCLI(w.db.GrantedLogin(t, "ada", "expiryctl_admin").URL, "")
	adam := newCLI(w.db.GrantedLogin(t, "adam", "expiryctl_admin").URL, "")
	proposed := ada.ok(t, "policy", "set", "--template", "reservations", "--why", "INC-7: watch reservations by default")
	m := regexp.MustCompile(`policy change (\d+) proposed`).FindStringSubmatch(proposed.stdout)
	if m == nil {
		t.Fatalf("policy set --template said: %s", proposed)
	}
	adam.ok(t, "policy", "approve", m[1], "--why", "the reservation shape is ours")
	shown := adam.ok(t, "policy", "show")
	if !strings.Contains(shown.stdout, `FROM "reservations".reservations r`) || !strings.Contains(shown.stdout, "processed_jobs") {
		t.Fatalf("policy show does not carry the template's queries:\n%s", shown.stdout)
	}

	reader := w.reservationsReader(t)
	// r-1's hold moved on to another version; r-5, r-10 … were paid and
	// r-7, r-14 expired (newReplayWorld): 7 of 20 are no longer the job's.
	if _, err := w.db.Pool.Exec(ctx, `UPDATE reservations.reservations SET version = 4 WHERE id = 'r-1'`); err != nil {
		t.Fatal(err)
	}
	const skipped = 7

	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(2)})
	id := strconv.FormatInt(req.ID, 10)
	w.approve(t, req.ID)
	w.runWorker(t)
	olga := newCLI(w.db.GrantedLogin(t, "olga", "expiryctl_operator").URL, "")

	// A reservation database that refuses the login: nothing goes out.
	refusing := w.db.Login(t, "no_connect")
	bad := olga.run(t, "replay", "run", id, "--outcome-url", refusing.URL)
	if bad.code == 0 {
		t.Fatalf("a run against a reservation database that refuses its login succeeded: %s", bad)
	}
	t.Logf("refused login: exit %d: %s", bad.code, strings.TrimSpace(bad.stderr))
	if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND sends > 0`, req.ID); c != 0 {
		t.Fatalf("%d items were sent with the reservation database refusing the login", c)
	}
	if s := w.status(t, req.ID); s != "running" && s != "approved" && s != "halted" {
		t.Fatalf("after the refused login the request is %s", s)
	}
	if s := w.status(t, req.ID); s == "halted" {
		w.approve(t, req.ID)
	}

	res := olga.ok(t, "replay", "run", id, "-o", "json", "--outcome-url", reader.URL)
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "completed" || got.Skipped != skipped || got.Confirmed != n-skipped {
		t.Fatalf("run %+v: want completed with %d skipped and %d confirmed\n%s", got, skipped, n-skipped, res)
	}
	if o := got.Outcomes; o == nil || o.Terminal != n-skipped || o.Conflicts != 0 || o.Unsettled != 0 {
		t.Errorf("outcomes %+v: want every replayed reservation terminal, no conflict", got.Outcomes)
	}
	for reason, want := range map[string]int{
		"not eligible: the reservation is paid, no longer held":                    4,
		"not eligible: the reservation is expired, no longer held":                 2,
		"not eligible: the reservation is at version 4, the job was for version 3": 1,
	} {
		if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'skipped' AND last_error = $2`,
			req.ID, reason); c != want {
			t.Errorf("%d items skipped as %q, want %d", c, reason, want)
		}
	}
	// r-1 moved on to version 4: its job was skipped, and it is as it was.
	w.assertTransitionedOnceBut(t, n-skipped, map[string]bool{"r-1": true})
	if strings.Contains(bad.stderr, "--database-url") || !strings.Contains(bad.stderr, "--outcome-url") {
		t.Errorf("the refused login's advice names the wrong setting: %s", bad.stderr)
	}
}
