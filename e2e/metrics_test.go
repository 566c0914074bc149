package e2e_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/fixture/promtooltest"
	"github.com/expiryctl/expiryctl/replay"
)

var servingMetricsOn = regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)

// metricsURL waits for p to say where it serves its metrics.
func metricsURL(t *testing.T, p *process) string {
	t.Helper()
	var url string
	waitFor(t, 30*time.Second, "the exporter to serve", func() bool {
		if p.exited() {
			t.Fatalf("exited before serving: %s", p.wait(time.Second))
		}
		if m := servingMetricsOn.FindStringSubmatch(p.stderr.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// scrapeMetrics fetches url and returns the body and its samples.
func scrapeMetrics(t *testing.T, url string) ([]byte, map[string]float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return body, promtooltest.Samples(t, body)
}

// TestMetricsServe scrapes the built binary's exporter over a private
// archive with known letters and one open request: the values are the
// archive's, the scrape passes `promtool check metrics`, and the readings
// leave one audit row however often they refresh.
func TestMetricsServe(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ingester := newCLI(db.GrantedLogin(t, "ingest-svc", "expiryctl_ingester").URL, "")
	operator := db.GrantedLogin(t, "metrics-svc", "expiryctl_operator")
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	r.publish(t, dlq, workerLetters(1, 3, "db_timeout", "pq: canceling statement due to statement timeout")...)
	r.publish(t, dlq, workerLetters(10, 2, "validation", "hold_until is in the past")...)
	ingester.ok(t, "dlq", "ingest", "--queue", dlq)

	ctx := withTimeout(t)
	var validation []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM expiryctl.dead_letters WHERE reason_category = 'validation' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		validation = append(validation, id)
	}
	if rows.Err() != nil || len(validation) != 2 {
		t.Fatalf("validation letters %v, %v", validation, rows.Err())
	}
	alice := db.GrantedLogin(t, "alice", "expiryctl_operator")
	if _, err := (&replay.Service{Pool: alice.Pool, Actor: "alice"}).Create(ctx, replay.NewRequest{
		Kind: replay.KindReplay, Selection: replay.Selection{IDs: validation}, Why: "INC-13",
		IncludePermanent: true, // validation letters: they stay in the request, which is what is measured
	}); err != nil {
		t.Fatal(err)
	}

	c := newCLI(operator.URL, "")
	p := c.start(t, "metrics", "serve", "--listen", "127.0.0.1:0", "--interval", "1s", "--work-queue", strings.TrimSuffix(dlq, ".dlq"))
	url := metricsURL(t, p)

	// A few refreshes: the audit row is the start's, not each reading's.
	var body []byte
	var got map[string]float64
	waitFor(t, 30*time.Second, "three readings", func() bool {
		body, got = scrapeMetrics(t, url)
		return got["expiryctl_metrics_snapshots_total"] >= 3
	})
	for k, v := range map[string]float64{
		`expiryctl_dead_letters_waiting{category="transient-exhausted"}`:        3,
		`expiryctl_dead_letters_waiting{category="validation"}`:                 2,
		`expiryctl_dead_letters_ingested_total{category="transient-exhausted"}`: 3,
		`expiryctl_dead_letters_ingested_total{category="validation"}`:          2,
		`expiryctl_replay_requests{status="pending"}`:                           1,
		`expiryctl_replay_requests{status="running"}`:                           0,
		`expiryctl_replay_requests{status="halted"}`:                            0,
		`expiryctl_replay_items{request_status="pending",state="pending"}`:      2,
		`expiryctl_replay_items_published_total`:                                0,
		`expiryctl_metrics_snapshot_errors_total`:                               0,
		`expiryctl_metrics_signal_available{signal="replay"}`:                   1,
		`expiryctl_metrics_signal_available{signal="audit"}`:                    1,
		`expiryctl_audit_checkpointed_rows`:                                     0,
		`expiryctl_audit_last_checkpoint_timestamp_seconds`:                     0,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// The letters were dead-lettered at the factories' epoch, in the past.
	if age := got[`expiryctl_dead_letter_oldest_waiting_age_seconds{category="validation"}`]; age < time.Since(epoch.Add(11*time.Minute)).Seconds()-60 {
		t.Errorf("oldest validation letter's age %v s", age)
	}
	if n := got["expiryctl_audit_rows"]; n < 3 {
		t.Errorf("expiryctl_audit_rows = %v: the ingest, the request and the exporter's start each wrote a row", n)
	}
	if out, err := promtooltest.Run(t, "", body, "check", "metrics"); err != nil || out != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'metrics.serve' AND db_role = $1`, operator.Name); n != 1 {
		t.Errorf("%d metrics.serve audit rows after %v readings, want 1", n, got["expiryctl_metrics_snapshots_total"])
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE db_role = $1 AND action <> 'metrics.serve'`, operator.Name); n != 0 {
		t.Errorf("the readings left %d more audit rows", n)
	}

	p.signal(syscall.SIGTERM)
	if res := p.wait(10 * time.Second); res.code != 0 {
		t.Fatalf("metrics serve did not stop cleanly: %s", res)
	}
}

// TestIngestFollowServesMetrics: a capture counts its own letters, exact at
// every scrape, and on an ingester's login (which may capture but not read
// the archive) says it serves only those.
func TestIngestFollowServesMetrics(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ingester := newCLI(db.GrantedLogin(t, "ingest-svc", "expiryctl_ingester").URL, "")
	r := newRabbit(t)
	dlq := r.queue(t, ".dlq", nil)
	r.publish(t, dlq, workerLetters(1, 4, "db_timeout", "timeout")...)
	r.publish(t, dlq, workerLetters(1, 1, "db_timeout", "timeout")...) // a duplicate

	p := ingester.start(t, "dlq", "ingest", "--queue", dlq, "--follow", "--metrics-listen", "127.0.0.1:0", "--metrics-interval", "1s")
	url := metricsURL(t, p)
	var body []byte
	var got map[string]float64
	stored := `expiryctl_ingest_letters_total{outcome="stored",queue="` + dlq + `"}`
	duplicates := `expiryctl_ingest_letters_total{outcome="duplicate",queue="` + dlq + `"}`
	waitFor(t, 30*time.Second, "the capture's counters", func() bool {
		body, got = scrapeMetrics(t, url)
		return got[stored]+got[duplicates] == 5
	})
	if got[stored] != 4 || got[duplicates] != 1 {
		t.Errorf("stored %v, duplicates %v", got[stored], got[duplicates])
	}
	if !strings.Contains(p.stderr.String(), "cannot read the archive, so only this process's own counters are served") {
		t.Errorf("no word that the archive's metrics are left out: %s", p.stderr.String())
	}
	for k := range got {
		if strings.HasPrefix(k, "expiryctl_dead_letters_") {
			t.Errorf("%s exported by a login that cannot read the archive", k)
		}
	}
	if got["expiryctl_metrics_snapshot_errors_total"] < 1 {
		t.Errorf("the failed readings are not counted: %v", got["expiryctl_metrics_snapshot_errors_total"])
	}
	if out, err := promtooltest.Run(t, "", body, "check", "metrics"); err != nil || out != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	p.signal(syscall.SIGTERM)
	if res := p.wait(10 * time.Second); res.code != 0 {
		t.Fatalf("ingest --follow did not stop cleanly: %s", res)
	}
}
