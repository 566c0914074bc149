package replay

import (
	"context"
	"maps"
	"testing"
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
	wantRequests := map[int64]RequestItems{pending.ID: {StatusPending, map[string]int64{"pending": 3}},
		approved.ID: {StatusApproved, map[string]int64{"pending": 1}}}
	if !maps.EqualFunc(got.Requests, wantRequests, func(a, b RequestItems) bool { return a.Status == b.Status && maps.Equal(a.States, b.States) }) {
		t.Errorf("by request %+v, want %+v (the completed request %d left out)", got.Requests, wantRequests, done.ID)
	}
	if after := b.count(t, `SELECT count(*) FROM expiryctl.audit_log`); after != before {
		t.Errorf("the tally wrote %d audit rows", after-before)
	}
}
