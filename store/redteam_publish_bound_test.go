package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/replay"
)

// TestRedTeamPublishBound: an operator with raw SQL resumes a request again
// and again with its items left publishing, as a runner made to time out
// again and again would, and on top of it lies that what it was cleared to
// send was never sent, to have it back to pending and cleared once more. No
// item is cleared for a publish (replay_items_send, which every publish of
// a run needs first) more than replay.PublishBound times; each then ends
// failed, saying why and that only a new request sends it again, and a new
// request does.
func TestRedTeamPublishBound(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	cohort := rt.letters[:3]
	req := rt.request(t, cohort...)
	rt.approve(t, rt.bob, req)
	var bound int
	if err := rt.owner.QueryRow(ctx, `SELECT expiryctl.replay_publish_bound()`).Scan(&bound); err != nil || bound != replay.PublishBound {
		t.Fatalf("the database's bound is %d (%v), expiryctl says %d", bound, err, replay.PublishBound)
	}

	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'alice')`, req.ID); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := rt.alice.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	openItems := func(request int64) []int64 {
		t.Helper()
		rows, err := rt.alice.Pool.Query(ctx, `SELECT dead_letter_id FROM expiryctl.replay_items
			WHERE request_id = $1 AND state IN ('pending', 'publishing') ORDER BY ordinal`, request)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// cleared counts, per letter, the publishes the database let through:
	// what any runner could have sent.
	cleared := map[int64]int{}
	boundRefusals := 0
	send := func(ids []int64) {
		t.Helper()
		_, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_send($1, 0, 2, $2)`, req.ID, ids)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			for _, id := range ids {
				cleared[id]++
			}
		case errors.As(err, &pgErr) && pgErr.Detail == "rule: publish-bound":
			boundRefusals++
		default:
			t.Fatalf("clearing %v: %v", ids, err)
		}
	}

	resumes := 0
	for ; resumes < 3*replay.PublishBound; resumes++ {
		exec(`SELECT * FROM expiryctl.replay_run_start('', $1, $2)`, req.ID, freshConsumers)
		ids := openItems(req.ID)
		if len(ids) == 0 {
			break
		}
		exec(`SELECT expiryctl.replay_items_mark($1, 0, 2, $2, '{}', '{}', '{}', '{}')`, req.ID, ids)
		send(ids)
		// The lie: none of it went out. The items go back to pending, and
		// out again in the same run.
		exec(`SELECT expiryctl.replay_run_interrupted('', $1, $2, '{}')`, req.ID, ids)
		exec(`SELECT expiryctl.replay_items_mark($1, 0, 2, $2, '{}', '{}', '{}', '{}')`, req.ID, ids)
		send(ids)
		// No confirm is ever recorded: the run "times out" with them
		// publishing, and the next start resumes them.
	}
	if resumes == 3*replay.PublishBound {
		t.Fatalf("after %d resumes items are still open: %v", resumes, openItems(req.ID))
	}
	if boundRefusals == 0 {
		t.Error("a fourth clearance was never refused by rule publish-bound")
	}
	for _, id := range cohort {
		if cleared[id] > replay.PublishBound {
			t.Errorf("letter %d was cleared for %d publishes under one approval, want at most %d", id, cleared[id], replay.PublishBound)
		}
		var state, why string
		var sends int
		if err := rt.alice.Pool.QueryRow(ctx, `SELECT state, coalesce(last_error, ''), sends FROM expiryctl.replay_items
			WHERE request_id = $1 AND dead_letter_id = $2`, req.ID, id).Scan(&state, &why, &sends); err != nil {
			t.Fatal(err)
		}
		if state != "failed" || sends != cleared[id] || !strings.Contains(why, "publish-bound") || !strings.Contains(why, "new request") {
			t.Errorf("letter %d: %s with %d sends (%d cleared), reason %q; want failed by rule publish-bound, naming a new request as the way out",
				id, state, sends, cleared[id], why)
		}
	}
	var details []byte
	if err := rt.alice.Pool.QueryRow(ctx, `SELECT details FROM expiryctl.audit_log WHERE action = 'replay.run.start'
		AND target = 'replay_request:' || $1::bigint ORDER BY seq DESC LIMIT 1`, req.ID).Scan(&details); err != nil {
		t.Fatal(err)
	}
	var start struct {
		Failed []int64 `json:"publish_bound_failed"`
	}
	if err := json.Unmarshal(details, &start); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(start.Failed, cohort) {
		t.Errorf("the start that failed them lists %v as spent (%s), want %v", start.Failed, details, cohort)
	}

	// Nothing sends a spent item, nor gives a send back.
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_items SET sends = 0 WHERE request_id = $1`, req.ID)
	refused(t, rt.owner, "item-states", `UPDATE expiryctl.replay_items SET sends = 0 WHERE request_id = $1`, req.ID)
	if _, err := rt.owner.Exec(ctx, `UPDATE expiryctl.replay_items SET sends = sends + 1 WHERE request_id = $1`, req.ID); !isCheckViolation(err, "replay_items_publish_bound") {
		t.Errorf("the owner counted a fourth send: %v, want the constraint replay_items_publish_bound to refuse it", err)
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_send($1, 0, 2, $2)`, req.ID, cohort); err == nil {
		t.Error("a failed item was cleared for a publish")
	}
	// Only the runner's login clears, and only an operator.
	oscar := rt.db.Login(t, "oscar", "expiryctl_operator")
	refused(t, oscar.Pool, "single-runner", `SELECT expiryctl.replay_items_send($1, 0, 2, $2)`, req.ID, cohort)
	refused(t, rt.bob.Pool, "privilege", `SELECT expiryctl.replay_items_send($1, 0, 2, $2)`, req.ID, cohort)

	// The request ends with them failed, which frees the letters, and a
	// new request, approved, sends them again.
	exec(`SELECT expiryctl.replay_run_complete('', $1, '{}')`, req.ID)
	again := rt.request(t, cohort...)
	rt.approve(t, rt.carol, again)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'alice')`, again.ID); err != nil {
		t.Fatal(err)
	}
	exec(`SELECT * FROM expiryctl.replay_run_start('', $1, $2)`, again.ID, freshConsumers)
	exec(`SELECT expiryctl.replay_items_mark($1, 0, 2, $2, '{}', '{}', '{}', '{}')`, again.ID, cohort)
	exec(`SELECT expiryctl.replay_items_send($1, 0, 2, $2)`, again.ID, cohort)
}

func isCheckViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == constraint
}
