package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// freshConsumers is what a runner would hand replay_run_start after seeing
// one consumer on a new handler version: the database takes the runner's
// word for it (docs/governance.md says so), so the red team's run tests
// that are not about the handler check claim it.
const freshConsumers = `{"queues": [{"queue": "reservation-expiry", "consumers": [{"tag": "w-1", "handler_version": "v-next"}]}]}`

// seedVersioned has ivan capture letters of category cat that a worker of
// handler version dead-lettered, and returns their ids.
func (rt *redTeam) seedVersioned(t *testing.T, first int, cat deadletter.Category, version string, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	headers, err := json.Marshal(map[string]any{"x-handler-version": version, "x-error-class": "version_conflict"})
	if err != nil {
		t.Fatal(err)
	}
	letters := make([]deadletter.Letter, n)
	for i := range letters {
		k := first + i
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":1,"idempotency_key":"expire:r-%d:v1"}`, k, k)
		letters[i] = deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-%d:v1", k),
			ReservationID: fmt.Sprintf("r-%d", k), IdempotencyKey: fmt.Sprintf("expire:r-%d:v1", k), SourceQueue: "q.dlq",
			OriginalExchange: "reservations", OriginalRoutingKey: "reservation.expire", Category: cat,
			Headers: headers, Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 4, i, 0, 0, time.UTC)}
	}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", letters); err != nil {
		t.Fatal(err)
	}
	rows, err := rt.owner.Query(ctx, `SELECT id FROM expiryctl.dead_letters WHERE reservation_id = ANY ($1) ORDER BY id`,
		reservationIDs(first, n))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) != n {
		t.Fatalf("seeded %d of %d letters: %v", len(ids), n, err)
	}
	return ids
}

func reservationIDs(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r-%d", first+i)
	}
	return out
}

// holdLock has alice take request's runner lock on a session of her own,
// as `replay run` does, so that only the handler check stands between her
// and a start.
func (rt *redTeam) holdLock(t *testing.T, request int64) {
	t.Helper()
	ctx := context.Background()
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close(context.Background()) })
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'test')`, request); err != nil {
		t.Fatal(err)
	}
}

// TestRedTeamHandlerCheck: alice, an operator holding the runner lock,
// tries to start a replay onto the handler that failed its cohort with raw
// SQL, saying nothing of the consumers, or the truth in several shapes.
func TestRedTeamHandlerCheck(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	ids := rt.seedVersioned(t, 100, deadletter.TransientExhausted, "v1", 3)
	req := rt.request(t, ids...)
	rt.approve(t, rt.bob, req)
	rt.holdLock(t, req.ID)
	start := `SELECT * FROM expiryctl.replay_run_start('', $1, $2)`
	// The old two-argument call is the new one without observations.
	refused(t, rt.alice.Pool, "handler-unverified", `SELECT * FROM expiryctl.replay_run_start('', $1)`, req.ID)
	for _, tc := range []struct{ rule, consumers string }{
		{"handler-unverified", `null`},
		{"handler-unverified", `[]`},
		{"handler-unverified", `{"unavailable": "cannot reach RabbitMQ's management API"}`},
		{"no-consumer", `{}`},
		{"no-consumer", `{"queues": []}`},
		{"no-consumer", `{"queues": [{"queue": "reservation-expiry", "consumers": []}]}`},
		{"no-consumer", `{"queues": [{"queue": "reservation-expiry"}, {"queue": "tap", "consumers": "none"}]}`},
		{"same-handler", `{"queues": [{"queue": "reservation-expiry", "consumers": [{"handler_version": "v1"}]}]}`},
		{"same-handler", `{"queues": [{"queue": "reservation-expiry", "consumers": [{"handler_version": ""}, {"tag": "no version"}]}]}`},
		{"same-handler", `{"queues": [{"queue": "reservation-expiry", "consumers": [{"handler_version": "v1"}]},
			{"queue": "tap", "consumers": []}]}`},
	} {
		refused(t, rt.alice.Pool, tc.rule, start, req.ID, tc.consumers)
	}
	// The check is the schema's own: no group may call it, or skip it by
	// setting the flag on the frozen request.
	refused(t, rt.alice.Pool, "privilege", `SELECT expiryctl.replay_handler_check($1, '{}', '{}')`, req.ID)
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_requests SET same_handler_ok = true, same_handler_why = 'x' WHERE id = $1`, req.ID)
	refused(t, rt.alice.Pool, "privilege", `UPDATE expiryctl.replay_requests SET failed_under = '{}' WHERE id = $1`, req.ID)
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET same_handler_ok = true, same_handler_why = 'x' WHERE id = $1`, req.ID)
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET failed_under = '{"v0": 3}' WHERE id = $1`, req.ID)
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET include_permanent = true WHERE id = $1`, req.ID)
	refused(t, rt.owner, "frozen-request", `UPDATE expiryctl.replay_requests SET via_exchange = NOT via_exchange WHERE id = $1`, req.ID)

	var status string
	if err := rt.owner.QueryRow(ctx, `SELECT status FROM expiryctl.replay_requests WHERE id = $1`, req.ID).Scan(&status); err != nil || status != "approved" {
		t.Fatalf("after the refused starts the request is %q (%v), want approved", status, err)
	}
	// A consumer on a new version beside one on the old, and an audit tap
	// bound to the same key that nobody consumes: the fix is deployed, and
	// the run starts.
	if _, err := rt.alice.Pool.Exec(ctx, start, req.ID,
		`{"queues": [{"queue": "reservation-expiry", "consumers": [{"handler_version": "v1"}, {"handler_version": "v2"}]},
			{"queue": "audit-tap", "consumers": []}]}`); err != nil {
		t.Fatalf("a start with a consumer on v2: %v", err)
	}
	var observed string
	if err := rt.owner.QueryRow(ctx, `SELECT details->'consumers'->'queues'->0->>'queue' FROM expiryctl.audit_log
		WHERE action = 'replay.run.start' AND target = $1`, fmt.Sprintf("replay_request:%d", req.ID)).Scan(&observed); err != nil || observed != "reservation-expiry" {
		t.Errorf("the start's audit row records the consumers observed as %q (%v)", observed, err)
	}
}

// TestRedTeamRequestFlags: the flags that loosen the handler and permanent
// letter rules are the requester's, set only by replay_request_create, and
// each needs what it needs.
func TestRedTeamRequestFlags(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	create := `SELECT * FROM expiryctl.replay_request_create('', $1, jsonb_build_object('ids', $2::bigint[]), NULL, 0, '', '', 'INC-1', false, false, $3, $4, $5)`
	transient := rt.letters[0:1]
	// --same-handler-ok with no reason.
	refused(t, rt.alice.Pool, "same-handler", create, "replay", transient, true, nil, false)
	refused(t, rt.alice.Pool, "same-handler", create, "replay", transient, true, "  ", false)
	// A discard publishes nothing: neither flag means anything there.
	refused(t, rt.alice.Pool, "kind", create, "discard", transient, true, "why", false)
	refused(t, rt.alice.Pool, "kind", create, "discard", transient, false, nil, true)

	conflicts := rt.seedVersioned(t, 200, deadletter.Conflict, "v1", 2)
	malformed := rt.seedVersioned(t, 300, deadletter.Malformed, "", 1)
	mixed := append(append(append([]int64{}, transient...), conflicts...), malformed...)
	refused(t, rt.alice.Pool, "permanent-letters", create, "replay", mixed, false, nil, false)
	refused(t, rt.alice.Pool, "permanent-letters", create, "replay", malformed, true, "the fix is out", false)
	// The old ten-argument call cannot include them either.
	refused(t, rt.alice.Pool, "permanent-letters", `SELECT * FROM expiryctl.replay_request_create('', 'replay',
		jsonb_build_object('ids', $1::bigint[]), NULL, 0, '', '', 'INC-1', false, false)`, conflicts)
	// A discard of the same letters needs no flag: deciding "never retry"
	// is what it is for.
	var discard int64
	if err := rt.alice.Pool.QueryRow(ctx, create, "discard", conflicts, false, nil, false).Scan(&discard, new(int)); err != nil {
		t.Fatalf("a discard of conflict letters: %v", err)
	}
	if _, err := (&replay.Service{Pool: rt.alice.Pool}).Cancel(ctx, discard, "test"); err != nil {
		t.Fatal(err)
	}

	// With the flags and a reason, the request is made and says so, for
	// the approver; the versions its cohort failed under are frozen with it.
	var id int64
	if err := rt.alice.Pool.QueryRow(ctx, create, "replay", mixed, true, "the conflict fix v2 reads stale versions", true).Scan(&id, new(int)); err != nil {
		t.Fatalf("a request with both flags: %v", err)
	}
	var sameOK, inclPerm bool
	var why, failed, targets string
	if err := rt.owner.QueryRow(ctx, `SELECT same_handler_ok, same_handler_why, include_permanent, failed_under::text, targets::text
		FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&sameOK, &why, &inclPerm, &failed, &targets); err != nil {
		t.Fatal(err)
	}
	if !sameOK || why != "the conflict fix v2 reads stale versions" || !inclPerm {
		t.Errorf("flags on the row: same_handler_ok %v (%q), include_permanent %v", sameOK, why, inclPerm)
	}
	if failed != `{"": 2, "v1": 2}` {
		t.Errorf("failed_under = %s, want 2 letters naming no version and 2 under v1", failed)
	}
	// The letters name no x-death: back to the work queue of q.dlq.
	if targets != `[{"letters": 4, "exchange": "", "routing_key": "q"}]` {
		t.Errorf("targets = %s", targets)
	}
	rt.approve(t, rt.bob, replay.Request{ID: id, CohortHash: cohortHash(t, rt, id)})
	rt.holdLock(t, id)
	// The requester said the same handler may take them: the run starts
	// with nothing observed.
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT * FROM expiryctl.replay_run_start('', $1, NULL, $2)`, id, capturesQDLQ); err != nil {
		t.Errorf("a same-handler-ok request did not start: %v", err)
	}
}

func cohortHash(t *testing.T, rt *redTeam, id int64) string {
	t.Helper()
	var hash string
	if err := rt.owner.QueryRow(context.Background(), `SELECT encode(cohort_hash, 'hex') FROM expiryctl.replay_requests WHERE id = $1`, id).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	return hash
}
