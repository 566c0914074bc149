package e2e_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/internal/sim/worker"
	"github.com/expiryctl/expiryctl/replay"
)

// outcomeSummary is `replay run -o json` with its outcomes.
type outcomeSummary struct {
	replaySummary
	HaltCondition string `json:"halt_condition"`
	Outcomes      *struct {
		Watched    int     `json:"watched"`
		Terminal   int     `json:"terminal"`
		Late       int     `json:"late"`
		Waiting    int     `json:"waiting"`
		Unsettled  int     `json:"unsettled"`
		Conflicts  int     `json:"conflicts"`
		LatencyP50 float64 `json:"latency_p50_seconds"`
		LatencyP99 float64 `json:"latency_p99_seconds"`
	} `json:"outcomes"`
}

// outcomePolicy watches the reference worker's model with worker.OutcomeQuery.
func outcomePolicy(window string, more ...string) []string {
	return append([]string{"canary_window=300ms", "outcome_query=" + worker.OutcomeQuery, "outcome_window=" + window}, more...)
}

// withPassword is u with a password the test server's trust authentication
// ignores: what must never be printed.
func withPassword(t *testing.T, raw, password string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

// cohortReservations are the reservations of the request's items with
// ordinals in [lo, hi], in run order.
func (w *replayWorld) cohortReservations(t *testing.T, request int64, lo, hi int) []string {
	t.Helper()
	rows, err := w.db.Pool.Query(withTimeout(t), `SELECT d.reservation_id FROM expiryctl.replay_items i
		JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		WHERE i.request_id = $1 AND i.ordinal BETWEEN $2 AND $3 ORDER BY i.ordinal`, request, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// applyEarlier makes the reference worker's model say the jobs of
// reservations were already applied, a minute ago, by an earlier copy: a
// replay of them is a duplicate.
func (w *replayWorld) applyEarlier(t *testing.T, reservations []string) {
	t.Helper()
	ctx := withTimeout(t)
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO reservations.processed_jobs (idempotency_key, reservation_id, processed_at, outcome)
		SELECT 'expire:' || id || ':v3', id, now() - interval '1 minute', 'expired' FROM unnest($1::text[]) id`, reservations); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE reservations.reservations SET status = 'expired', version = 4,
		expired_at = now() - interval '1 minute' WHERE id = ANY ($1)`, reservations); err != nil {
		t.Fatal(err)
	}
}

// TestReplayOutcomesWatchedEndToEnd replays into the running reference
// worker with the policy's outcome query watching: every item's outcome is
// recorded with its latency, jobs whose key was already applied show as
// conflicts, and the run, the result and `replay show` say so, with the
// outcome database's password nowhere in the output.
func TestReplayOutcomesWatchedEndToEnd(t *testing.T) {
	t.Parallel()
	const n = 20
	w := newReplayWorld(t, n, outcomePolicy("30s", "stop_conflict_ratio=0.5")...)
	pool := w.db.Pool
	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(2)})
	id := strconv.FormatInt(req.ID, 10)
	w.approve(t, req.ID)
	dups := w.cohortReservations(t, req.ID, 5, 7)
	w.applyEarlier(t, dups)
	w.runWorker(t)

	const secret = "s3cret-outcome-pw"
	outcomeURL := withPassword(t, w.db.URL, secret)
	res := w.cli.ok(t, "replay", "run", id, "-o", "json", "--outcome-url", outcomeURL)
	if strings.Contains(res.stdout+res.stderr, secret) {
		t.Fatalf("the outcome database's password was printed: %s", res)
	}
	var got outcomeSummary
	decodeJSON(t, res, &got)
	o := got.Outcomes
	if got.Status != "completed" || o == nil {
		t.Fatalf("run %+v: want completed with outcomes", got)
	}
	if o.Watched != n || o.Terminal != n || o.Waiting != 0 || o.Unsettled != 0 || o.Conflicts != len(dups) {
		t.Errorf("outcomes %+v: want %d watched and terminal, %d conflicts, none waiting or unsettled", *o, n, len(dups))
	}
	if o.LatencyP50 < 0 || o.LatencyP99 < o.LatencyP50 || o.LatencyP99 > 30 {
		t.Errorf("latency p50 %gs p99 %gs: want 0 ≤ p50 ≤ p99 within the window", o.LatencyP50, o.LatencyP99)
	}

	// Per item, in the database.
	if c := count(t, pool, `SELECT count(*) FROM expiryctl.replay_outcomes WHERE request_id = $1 AND terminal_at IS NOT NULL AND latency IS NOT NULL`, req.ID); c != n {
		t.Errorf("%d items recorded terminal with a latency, want %d", c, n)
	}
	if c := count(t, pool, `SELECT count(*) FROM expiryctl.replay_outcomes o JOIN expiryctl.dead_letters d ON d.id = o.dead_letter_id
		WHERE o.request_id = $1 AND o.duplicate AND d.reservation_id = ANY ($2)`, req.ID, dups); c != len(dups) {
		t.Errorf("%d of the jobs applied earlier recorded as duplicates, want %d", c, len(dups))
	}
	if c := count(t, pool, `SELECT count(*) FROM expiryctl.replay_outcomes WHERE request_id = $1 AND duplicate`, req.ID); c != len(dups) {
		t.Errorf("%d duplicates recorded, want %d", c, len(dups))
	}
	if c := count(t, pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.complete' AND target = $1
		AND (details->'outcomes'->>'conflicts')::int = $2`, "replay_request:"+id, len(dups)); c != 1 {
		t.Errorf("the completion's audit row should carry the outcomes (%d rows)", c)
	}

	// replay show reports them.
	var shown struct {
		Outcomes map[string]float64 `json:"outcomes"`
	}
	decodeJSON(t, w.cli.ok(t, "replay", "show", id, "-o", "json"), &shown)
	if shown.Outcomes["terminal"] != n || shown.Outcomes["conflicts"] != float64(len(dups)) {
		t.Errorf("replay show -o json outcomes %v: want %d terminal and %d conflicts", shown.Outcomes, n, len(dups))
	}
	table := w.cli.ok(t, "replay", "show", id)
	for _, l := range strings.Split(table.stdout, "\n") {
		if strings.Contains(l, "outcomes ") {
			t.Logf("replay show: %s", strings.TrimSpace(l))
		}
	}
	if !strings.Contains(table.stdout, "outcomes             20/20 terminal") || !strings.Contains(table.stdout, "3 conflicts") {
		t.Errorf("replay show should report the outcomes:\n%s", table.stdout)
	}
}

// TestReplayOutcomesHaltWhenTheWorkerStopsTransitioning blocks the
// reference worker's transitions (a session holds an EXCLUSIVE lock on its
// reservations: plain reads go on, its SELECT … FOR UPDATE waits): the
// canary's reservations never reach their terminal state, and the run
// halts on the outcome window before anything beyond the canary goes out.
func TestReplayOutcomesHaltWhenTheWorkerStopsTransitioning(t *testing.T) {
	t.Parallel()
	const n, canary = 12, 2
	w := newReplayWorld(t, n, outcomePolicy("1s")...)
	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(canary)})
	id := strconv.FormatInt(req.ID, 10)
	w.approve(t, req.ID)
	w.runWorker(t)

	ctx := context.Background()
	blocker, err := pgx.Connect(ctx, w.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE reservations.reservations IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx); _ = blocker.Close(ctx) })

	res := w.cli.exits(t, 8, "replay", "run", id, "-o", "json")
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "halted" || got.HaltCondition != replay.ConditionUnsettledRatio || !strings.Contains(res.stderr, "outcome window") {
		t.Fatalf("run %+v: want halted by %s naming the outcome window\n%s", got, replay.ConditionUnsettledRatio, res)
	}
	if got.Outcomes == nil || got.Outcomes.Unsettled != canary || got.Outcomes.Terminal != 0 || got.Published != canary {
		t.Errorf("run %+v outcomes %+v: want the %d canary items published and unsettled, nothing more", got, got.Outcomes, canary)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.replay_outcomes WHERE request_id = $1 AND terminal_at IS NULL`, req.ID); c != canary {
		t.Errorf("%d items recorded not terminal, want %d", c, canary)
	}
	if c := count(t, w.db.Pool, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.halt' AND target = $1
		AND details->>'condition' = $2 AND (details->'outcomes'->>'unsettled')::int = $3`, "replay_request:"+id, replay.ConditionUnsettledRatio, canary); c != 1 {
		t.Errorf("the halt's audit row should name the condition and carry the outcomes (%d rows)", c)
	}
	if s := w.status(t, req.ID); s != "halted" {
		t.Errorf("request is %s, want halted", s)
	}
}

// TestReplayOutcomesHaltOnConflicts replays a canary whose jobs were all
// applied already: every transition is a duplicate, and the run halts on
// the conflict ratio after the canary.
func TestReplayOutcomesHaltOnConflicts(t *testing.T) {
	t.Parallel()
	const n, canary = 10, 2
	w := newReplayWorld(t, n, outcomePolicy("30s", "stop_conflict_ratio=0.1")...)
	req := w.request(t, replay.NewRequest{Rate: 200, Canary: intRef(canary)})
	id := strconv.FormatInt(req.ID, 10)
	w.approve(t, req.ID)
	w.applyEarlier(t, w.cohortReservations(t, req.ID, 0, canary-1))
	w.runWorker(t)

	res := w.cli.exits(t, 8, "replay", "run", id, "-o", "json")
	var got outcomeSummary
	decodeJSON(t, res, &got)
	if got.Status != "halted" || got.HaltCondition != replay.ConditionConflictRatio || got.Published != canary {
		t.Fatalf("run %+v: want halted by %s after the %d canary items\n%s", got, replay.ConditionConflictRatio, canary, res)
	}
	if got.Outcomes == nil || got.Outcomes.Conflicts != canary {
		t.Errorf("outcomes %+v: want %d conflicts", got.Outcomes, canary)
	}
}
