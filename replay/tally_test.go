package replay

import (
	"context"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestTallyCountsOpenItemsAndEveryPublish: the open requests' items by
// request status and item state, the completed request's published items in
// the total only, and nothing written to the trail.
func TestTallyCountsOpenItemsAndEveryPublish(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 6)
	done := b.approved(t, NewRequest{Canary: intPtr(0)}, ids[:2])
	if res, err := b.runner(t).Run(ctx, done.ID); err != nil || res.Confirmed != 2 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	pending := b.pending(t, NewRequest{}, ids[2:5])
	approved := b.approved(t, NewRequest{}, ids[5:])
	before := b.count(t, `SELECT count(*) FROM expiryctl.audit_log`)

	got, err := b.as("alice").Tally(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[Status]map[string]int64{StatusPending: {"pending": 3}, StatusApproved: {"pending": 1}}
	if !maps.EqualFunc(got.Open, want, maps.Equal) || got.Published != 2 {
		t.Errorf("tally %+v, want open %v and 2 published", got, want)
	}
	wantRequests := map[int64]RequestItems{pending.ID: {Status: StatusPending, States: map[string]int64{"pending": 3}},
		approved.ID: {Status: StatusApproved, States: map[string]int64{"pending": 1}}}
	if !maps.EqualFunc(got.Requests, wantRequests, func(a, b RequestItems) bool { return a.Status == b.Status && maps.Equal(a.States, b.States) }) {
		t.Errorf("by request %+v, want %+v (the completed request %d left out)", got.Requests, wantRequests, done.ID)
	}
	if after := b.count(t, `SELECT count(*) FROM expiryctl.audit_log`); after != before {
		t.Errorf("the tally wrote %d audit rows", after-before)
	}
}

// TestTallierCountsAnEndedRequestOnce: a Tallier counts an ended request's
// confirmed items at the first tally after it ended, then remembers them
// rather than reading them again, so the published total counts every
// request exactly once, whether it was open or ended when first seen.
func TestTallierCountsAnEndedRequestOnce(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 5)
	first := b.approved(t, NewRequest{Canary: intPtr(0)}, ids[:2])
	if res, err := b.runner(t).Run(ctx, first.ID); err != nil || res.Confirmed != 2 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	second := b.approved(t, NewRequest{Canary: intPtr(0)}, ids[2:])

	tallier := &Tallier{Service: b.as("alice")}
	published := func(what string, want int64) {
		t.Helper()
		got, err := tallier.Tally(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Published != want {
			t.Errorf("%s: %d published, want %d", what, got.Published, want)
		}
	}
	published("one request completed, one approved", 2)
	if res, err := b.runner(t).Run(ctx, second.ID); err != nil || res.Confirmed != 3 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	published("both completed", 5)
	published("nothing changed", 5)

	// Taken back by hand, around the guards: a Tallier that read the
	// history again would see it, Service.Tally does.
	superuser := b.db.Superuser(t)
	err := pgx.BeginFunc(ctx, superuser, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE expiryctl.replay_items SET state = 'failed' WHERE request_id = $1`, first.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	published("the first request's items changed by hand after it was counted", 5)
	fresh, err := b.as("alice").Tally(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Published != 3 {
		t.Errorf("Service.Tally: %d published, want 3 (it reads every request)", fresh.Published)
	}
}
