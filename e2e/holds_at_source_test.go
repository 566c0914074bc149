package e2e_test

import (
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/replay"
)

// TestHoldsPastDeadlineAtSource is issue 32's gap at its source: 20 jobs
// died and wait in the archive, overdue; the reservation database holds 14
// of their reservations still held, and 30 more held past their deadline
// whose jobs left no letter (lost before the dead-letter queue). `dlq
// summary` and `metrics serve`, given the reservation database's read-only
// login, count the 44 beside the archive's 20 and say 24 no letter speaks
// for. A reservation database that refuses the login, or is slower than
// the query's bound, leaves the archive's figures whole, says why, and
// never shows the URL's password.
func TestHoldsPastDeadlineAtSource(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t, 20, "gap_query="+replay.ReservationsGapQuery("reservations"))
	ctx := withTimeout(t)
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO reservations.reservations (id, status, version, hold_until, units)
		SELECT 'lost-' || i, 'held', 1, now() - interval '20 minutes', 1 FROM generate_series(1, 30) AS i`); err != nil {
		t.Fatal(err)
	}
	// Three holds seconds past their deadline, their jobs on the way: the
	// template's minute of tolerance leaves them out.
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO reservations.reservations (id, status, version, hold_until, units)
		SELECT 'due-' || i, 'held', 1, now() - interval '10 seconds', 1 FROM generate_series(1, 3) AS i`); err != nil {
		t.Fatal(err)
	}
	held := count(t, w.db.Pool, `SELECT count(*) FROM reservations.reservations WHERE status = 'held' AND hold_until < now() - interval '1 minute'`)
	if held != 44 {
		t.Fatalf("%d holds past their deadline staged, want 44", held)
	}
	reader := w.reservationsReader(t)
	olga := newCLI(w.db.GrantedLogin(t, "olga", "expiryctl_operator").URL, "")

	var got struct {
		Overdue struct {
			Count     int `json:"count"`
			Permanent int `json:"permanent"`
		} `json:"overdue"`
		Holds struct {
			Configured  bool     `json:"configured"`
			Unavailable string   `json:"unavailable"`
			Past        *int     `json:"past_deadline"`
			Unaccounted *int     `json:"unaccounted"`
			Late        *float64 `json:"oldest_late_seconds"`
		} `json:"holds_at_source"`
	}
	decodeJSON(t, olga.ok(t, "dlq", "summary", "-o", "json", "--outcome-url", reader.URL), &got)
	if h := got.Holds; got.Overdue.Count != 20 || !h.Configured || h.Past == nil || *h.Past != 44 || *h.Unaccounted != 24 || *h.Late < 3600 {
		t.Fatalf("summary: %d overdue letters, holds at source %+v; want 20, and 44 past deadline (24 unaccounted, the oldest an hour late)",
			got.Overdue.Count, got.Holds)
	}
	piped := olga.ok(t, "dlq", "summary", "--outcome-url", reader.URL)
	if !strings.Contains(piped.stdout, "HOLDS PAST DEADLINE\tOLDEST DEADLINE\tOLDEST LATE S\tUNACCOUNTED\tUNAVAILABLE\n44\t") {
		t.Errorf("the piped summary lacks the holds at source:\n%s", piped.stdout)
	}

	// Piped, the watch's one line carries them too.
	watch := olga.start(t, "dlq", "summary", "--watch=1s", "--outcome-url", reader.URL)
	waitFor(t, 20*time.Second, "a piped watch line with the holds at source", func() bool {
		return strings.Contains(watch.stdout.String(), " overdue=20 ") && strings.Contains(watch.stdout.String(), " at_source=44 unaccounted=24 ")
	})
	watch.signal(syscall.SIGTERM)
	if r := watch.wait(runTimeout); r.code != 0 {
		t.Errorf("dlq summary --watch ended on SIGTERM: %s", r)
	}

	// Without the URL the query runs against expiryctl's own database,
	// where this login reads no reservation: the summary says what to give.
	decodeJSON(t, olga.ok(t, "dlq", "summary", "-o", "json"), &got)
	if got.Overdue.Count != 20 || got.Holds.Past != nil || !strings.Contains(got.Holds.Unavailable, "failed against expiryctl's own database") ||
		!strings.Contains(got.Holds.Unavailable, "no --outcome-url or EXPIRYCTL_OUTCOME_URL was given") {
		t.Errorf("no --outcome-url: %d overdue, holds %+v; want 20 and the missing URL named", got.Overdue.Count, got.Holds)
	}
	t.Logf("no --outcome-url: %s", got.Holds.Unavailable)

	p := olga.start(t, "metrics", "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--outcome-url", reader.URL)
	_, samples := scrapeMetrics(t, metricsURL(t, p))
	for name, want := range map[string]float64{
		"expiryctl_reservation_gap_query_up":        1,
		"expiryctl_reservation_holds_past_deadline": 44,
		"expiryctl_overdue_holds":                   20,
	} {
		if samples[name] != want {
			t.Errorf("%s = %v, want %v", name, samples[name], want)
		}
	}
	if late := samples["expiryctl_reservation_oldest_hold_past_deadline_seconds"]; late < 3600 {
		t.Errorf("the oldest hold past its deadline is %vs late, want an hour or more", late)
	}

	// A reservation database that refuses the login: the archive's
	// figures, and why the holds are missing, never the password.
	refusing := w.db.Login(t, "no_connect")
	u, err := url.Parse(refusing.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2")
	res := olga.ok(t, "dlq", "summary", "-o", "json", "--outcome-url", u.String())
	decodeJSON(t, res, &got)
	if got.Overdue.Count != 20 || got.Holds.Past != nil || got.Holds.Unavailable == "" || strings.Contains(res.stdout+res.stderr, "hunter2") {
		t.Errorf("a refused login: %d overdue, holds %+v\n%s", got.Overdue.Count, got.Holds, res)
	}
	t.Logf("refused login: %s", got.Holds.Unavailable)

	// A reservation database slower than the query's bound.
	changes, err := replay.ParsePolicyChanges([]string{"gap_query=SELECT 0::bigint, now() FROM pg_sleep(30)"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.SetPolicy(ctx, w.db.Pool, "admin", changes); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	decodeJSON(t, olga.ok(t, "dlq", "summary", "-o", "json", "--outcome-url", reader.URL), &got)
	if took := time.Since(start); got.Overdue.Count != 20 || got.Holds.Past != nil || !strings.Contains(got.Holds.Unavailable, "statement timeout") || took > 20*time.Second {
		t.Errorf("a slow reservation database: %d overdue, holds %+v, after %s", got.Overdue.Count, got.Holds, time.Since(start))
	}
	t.Logf("slow reservation database: %s", got.Holds.Unavailable)
}

// TestHoldsAtSourceThroughAnOutage puts the reservation database behind a
// fault proxy: down (nothing listens), then back, then a network that
// stops answering mid-connection. The summary and the exporter keep the
// archive's figures throughout and say why the gap is missing; the
// exporter reads the gap again once the database is back, and a database
// that goes quiet costs a reading its bound (replay.GapDeadline), not the
// reading.
func TestHoldsAtSourceThroughAnOutage(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t, 20, "gap_query="+replay.ReservationsGapQuery("reservations"))
	held := count(t, w.db.Pool, `SELECT count(*) FROM reservations.reservations WHERE status = 'held' AND hold_until < now() - interval '1 minute'`)
	reader := w.reservationsReader(t)
	u, err := url.Parse(reader.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFaultProxy(t, u.Host)
	through := proxy.through(t, reader.URL)
	olga := newCLI(w.db.GrantedLogin(t, "olga", "expiryctl_operator").URL, "")

	// Down: the port refuses connections.
	proxy.proxy.Stop()
	var got struct {
		Overdue struct {
			Count int `json:"count"`
		} `json:"overdue"`
		Holds struct {
			Unavailable string `json:"unavailable"`
			Past        *int   `json:"past_deadline"`
		} `json:"holds_at_source"`
	}
	decodeJSON(t, olga.ok(t, "dlq", "summary", "-o", "json", "--outcome-url", through), &got)
	if got.Overdue.Count != 20 || got.Holds.Past != nil || !strings.Contains(got.Holds.Unavailable, "reservation database") {
		t.Errorf("the reservation database down: %d overdue, holds %+v; want 20 and why the holds are missing", got.Overdue.Count, got.Holds)
	}
	t.Logf("down: %s", got.Holds.Unavailable)
	table := olga.ok(t, "dlq", "summary", "--outcome-url", through)
	if !strings.Contains(table.stdout, "\n20\t") || !strings.Contains(table.stdout, "reservation database") {
		t.Errorf("the piped summary with the reservation database down lacks the overdue letters or why the holds are missing:\n%s", table.stdout)
	}

	p := olga.start(t, "metrics", "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--outcome-url", through)
	scrape := metricsURL(t, p)
	var samples map[string]float64
	waitFor(t, 30*time.Second, "the exporter to read the archive with the gap query down", func() bool {
		_, samples = scrapeMetrics(t, scrape)
		up, read := samples["expiryctl_reservation_gap_query_up"]
		return read && up == 0 && samples["expiryctl_overdue_holds"] == 20
	})
	if _, ok := samples["expiryctl_reservation_holds_past_deadline"]; ok {
		t.Errorf("holds past deadline exported while the reservation database is down: %v", samples)
	}

	// Back: the exporter started while it was down reads it now.
	if err := proxy.proxy.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the exporter to read the gap once the reservation database is back", func() bool {
		_, samples = scrapeMetrics(t, scrape)
		return samples["expiryctl_reservation_gap_query_up"] == 1 && samples["expiryctl_reservation_holds_past_deadline"] == float64(held)
	})

	// Quiet: the connection the exporter keeps stops answering, and new
	// ones hang. The gap goes down within its bound; the archive's
	// figures stay fresh.
	// A reading that waited on it for longer than its bound would fail
	// (its deadline spent) and leave the previous one, gap up, on show.
	proxy.add(t, toxic("timeout", "downstream", `{"timeout":0}`), toxic("timeout", "upstream", `{"timeout":0}`))
	quiet := time.Now()
	waitFor(t, replay.GapDeadline+8*time.Second, "the exporter to report the quiet reservation database within the gap's bound", func() bool {
		_, samples = scrapeMetrics(t, scrape)
		return samples["expiryctl_reservation_gap_query_up"] == 0
	})
	t.Logf("gap query down %s after the network went quiet", time.Since(quiet).Round(time.Second))
	time.Sleep(2 * replay.GapDeadline)
	_, samples = scrapeMetrics(t, scrape)
	if age := samples["expiryctl_metrics_snapshot_age_seconds"]; age > 2*replay.GapDeadline.Seconds() || samples["expiryctl_overdue_holds"] != 20 {
		t.Errorf("with the reservation database quiet the snapshot is %.0fs old with %v overdue; want fresh readings of the archive's 20",
			age, samples["expiryctl_overdue_holds"])
	}
	if failed := samples["expiryctl_metrics_snapshot_errors_total"]; failed != 0 {
		t.Errorf("%v readings failed: a reservation database down or quiet must cost only the gap", failed)
	}
	if strings.Contains(p.stderr.String(), "password") {
		t.Errorf("the exporter's log names a password:\n%s", p.stderr.String())
	}
}
