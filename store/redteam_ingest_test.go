package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestRedTeamIngesterLineage: the ingester captures letters that claim to
// come back from a replay request. The claim is kept for a job the
// request published, and dropped, with the count in the batch's audit
// row, for a job it never published and for a request that does not
// exist.
func TestRedTeamIngesterLineage(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0])
	rt.approve(t, rt.bob, req)
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	for _, sql := range []string{
		`SELECT expiryctl.replay_run_acquire($1, 'alice')`,
		`SELECT * FROM expiryctl.replay_run_start('', $1, '` + freshConsumers + `')`,
	} {
		if _, err := lock.Exec(ctx, sql, req.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 0, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[:1]); err != nil {
		t.Fatal(err)
	}

	again := func(job int, request int64) deadletter.Letter {
		body := fmt.Appendf(nil, `{"reservation_id":"r-%d","again":true}`, job)
		id := request
		return deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: fmt.Sprintf("expire:r-%d:v1", job),
			ReservationID: fmt.Sprintf("r-%d", job), SourceQueue: "q.dlq", Category: deadletter.TransientExhausted,
			Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Now(), ReplayRequestID: &id, ReplayCount: 1}
	}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", []deadletter.Letter{again(0, req.ID), again(5, req.ID), again(4, 999)}); err != nil {
		t.Fatal(err)
	}
	for job, want := range map[string]*int64{"expire:r-0:v1": &req.ID, "expire:r-5:v1": nil, "expire:r-4:v1": nil} {
		var got *int64
		var count int
		if err := rt.owner.QueryRow(ctx, `SELECT replay_request_id, replay_count FROM expiryctl.dead_letters
			WHERE job_key = $1 ORDER BY id DESC LIMIT 1`, job).Scan(&got, &count); err != nil {
			t.Fatal(err)
		}
		switch {
		case want == nil && (got != nil || count != 0):
			t.Errorf("%s: stored as back from request %v (count %d), a claim no request's publish backs", job, got, count)
		case want != nil && (got == nil || *got != *want || count != 1):
			t.Errorf("%s: stored as back from %v (count %d), want request %d, which published it", job, got, count, *want)
		}
	}
	var dropped int
	if err := rt.owner.QueryRow(ctx, `SELECT (details->>'lineage_dropped')::int FROM expiryctl.audit_log
		WHERE action = 'dlq.ingest.batch' ORDER BY seq DESC LIMIT 1`).Scan(&dropped); err != nil || dropped != 2 {
		t.Errorf("the batch's audit row counts %d dropped claims (%v), want 2", dropped, err)
	}
}

// TestRedTeamBackdatedLetterKeepsItsRetention: the ingester captures a
// letter that claims to have died in 1970. A purge at the policy's
// retention leaves it: retention runs on the capture time.
func TestRedTeamBackdatedLetterKeepsItsRetention(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	body := []byte(`{"reservation_id":"r-1970"}`)
	old := deadletter.Letter{Fingerprint: sha256.Sum256(body), JobKey: "expire:r-1970:v1", ReservationID: "r-1970",
		SourceQueue: "q.dlq", Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body,
		DeadLetteredAt: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", "q.dlq", []deadletter.Letter{old}); err != nil {
		t.Fatal(err)
	}
	var retention time.Duration
	if err := rt.owner.QueryRow(ctx, `SELECT extract(epoch FROM retention)::bigint * 1000000000 FROM expiryctl.policy`).Scan(&retention); err != nil {
		t.Fatal(err)
	}
	preview, err := deadletter.PurgePreview(ctx, rt.alice.Pool, retention)
	if err != nil {
		t.Fatal(err)
	}
	res, err := deadletter.Purge(ctx, rt.alice.Pool, deadletter.PurgeOptions{Actor: "alice", OlderThan: retention})
	if err != nil {
		t.Fatal(err)
	}
	var redacted bool
	if err := rt.owner.QueryRow(ctx, `SELECT redacted_at IS NOT NULL FROM expiryctl.dead_letters WHERE job_key = 'expire:r-1970:v1'`).Scan(&redacted); err != nil {
		t.Fatal(err)
	}
	if redacted || res.Redacted != 0 || preview.Redacted != 0 {
		t.Fatalf("a letter captured now that claims 1970: redacted %v (purge %d, preview %d), want it kept for the retention", redacted, res.Redacted, preview.Redacted)
	}
}
