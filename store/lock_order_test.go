package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRecordWaitsForTheRequestBeforeItsItems: a cancel locks the request's
// row and then, in its end trigger, the letters and the items. The recorder
// of confirms must take the request's row before any item or letter, or the
// two deadlock (40P01, seen under load). Here a session holds the request's
// row as a cancel does; the recorder's call must wait on it holding no item,
// so that a third session can still lock every item at once.
func TestRecordWaitsForTheRequestBeforeItsItems(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	req := rt.request(t, rt.letters[0], rt.letters[1])
	rt.approve(t, rt.bob, req)
	lock, err := pgx.Connect(ctx, rt.alice.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	if _, err := lock.Exec(ctx, `SELECT expiryctl.replay_run_acquire($1, 'test')`, req.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT * FROM expiryctl.replay_run_start('', $1, $2)`, req.ID, freshConsumers); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_mark($1, 0, 1, $2, '{}', '{}', '{}', '{}')`, req.ID, rt.letters[:2]); err != nil {
		t.Fatal(err)
	}

	// The cancel's first step: the request's row, held.
	cancel, err := rt.owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel.Rollback(ctx) //nolint:errcheck // the test ends it
	if _, err := cancel.Exec(ctx, `SELECT 1 FROM expiryctl.replay_requests WHERE id = $1 FOR NO KEY UPDATE`, req.ID); err != nil {
		t.Fatal(err)
	}

	recorded := make(chan error, 1)
	go func() {
		_, err := rt.alice.Pool.Exec(ctx, `SELECT expiryctl.replay_items_record($1, 0, 1, $2, '{}', '{}')`, req.ID, rt.letters[:2])
		recorded <- err
	}()
	// Wait until the recorder is blocked on a lock (seen by the server's
	// administrator: pg_stat_activity hides another login's waits).
	admin := rt.db.Superuser(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND usename = $1 AND datname = current_database())`, rt.alice.Name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-recorded:
			t.Fatalf("the recorder did not wait for the request's row held by a cancel (error %v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder neither waited nor finished")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Waiting, it holds no item and no letter: the cancel's trigger would get them.
	if _, err := cancel.Exec(ctx, `SELECT 1 FROM expiryctl.replay_items WHERE request_id = $1 FOR UPDATE NOWAIT`, req.ID); err != nil {
		t.Fatalf("an item is locked while the recorder waits for the request: %v", err)
	}
	if _, err := cancel.Exec(ctx, `SELECT 1 FROM expiryctl.dead_letters WHERE id = ANY ($1) FOR UPDATE NOWAIT`, rt.letters[:2]); err != nil {
		t.Fatalf("a letter is locked while the recorder waits for the request: %v", err)
	}
	if err := cancel.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-recorded; err != nil {
		t.Fatalf("after the cancel let go, the recorder failed: %v", err)
	}
}
