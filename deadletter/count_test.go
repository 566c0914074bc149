package deadletter_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestCountMatchingCountsUpToItsBoundUnaudited: the live count matches what
// the listing of the same filter lists, says "more" past its bound, and
// writes no audit row.
func TestCountMatchingCountsUpToItsBoundUnaudited(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var letters []deadletter.Letter
	for i := range 25 {
		c := deadletter.TransientExhausted
		if i%5 == 0 {
			c = deadletter.Validation
		}
		letters = append(letters, seedLetter(i, c, "q.dlq"))
	}
	seed(t, db.Pool, letters...)
	archive := deadletter.NewArchive(db.Pool, "alice")
	ctx := context.Background()
	var before int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    deadletter.Filter
		upTo int
		want deadletter.MatchCount
	}{
		{deadletter.Filter{}, 100, deadletter.MatchCount{N: 25}},
		{deadletter.Filter{}, 25, deadletter.MatchCount{N: 25}},
		{deadletter.Filter{}, 24, deadletter.MatchCount{N: 24, More: true}},
		{deadletter.Filter{Categories: []deadletter.Category{deadletter.Validation}}, 100, deadletter.MatchCount{N: 5}},
		{deadletter.Filter{Search: "R-13"}, 100, deadletter.MatchCount{N: 1}},
		{deadletter.Filter{Search: "%"}, 100, deadletter.MatchCount{}},
	} {
		got, err := archive.CountMatching(ctx, tc.f, tc.upTo)
		if err != nil || got != tc.want {
			t.Errorf("CountMatching(%+v, %d) = %+v, %v; want %+v", tc.f, tc.upTo, got, err, tc.want)
		}
	}
	var after int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the live count wrote %d audit rows, want none", after-before)
	}
}

// TestCountEligibleAgreesWithLettersMatching: the cohort form's count is
// the number of letters the schema's letters_matching gives a request's
// filter: the replayed, discarded, in-request and redacted are not counted.
func TestCountEligibleAgreesWithLettersMatching(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Beyond the policy's 90 days' retention, so that a purge may redact.
	now := time.Now().UTC().Truncate(time.Second).Add(-100 * 24 * time.Hour)
	var specs []letterSpec
	for i := range 80 {
		s := letterSpec{category: deadletter.TransientExhausted, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Duration(i)*time.Minute)}
		switch {
		case i < 40:
			s.status = deadletter.StatusReplayed
		case i < 45:
			s.status = deadletter.StatusDiscarded
		case i < 50:
			s.status = deadletter.StatusInRequest
		}
		specs = append(specs, s)
	}
	seedSpecs(t, db.Pool, specs...)
	ctx := context.Background()
	// The two oldest, dead, are past retention: redacted, not eligible.
	capturedWhenDead(t, db.Pool)
	if res, err := deadletter.Purge(ctx, db.Pool, deadletter.PurgeOptions{Actor: "ops", OlderThan: time.Since(now) + 78*time.Minute - 30*time.Second}); err != nil || res.Redacted != 2 {
		t.Fatalf("purge: %+v, %v; want 2 redacted", res, err)
	}
	archive := deadletter.NewArchive(db.Pool, "alice")
	for _, f := range []deadletter.Filter{
		{},
		{Categories: []deadletter.Category{deadletter.TransientExhausted}},
		{Status: deadletter.StatusDead},
		{Status: deadletter.StatusReplayed},
		{Since: ago(now, 60*time.Minute)},
	} {
		sel, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var want int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.letters_matching($1::jsonb)`, sel).Scan(&want); err != nil {
			t.Fatal(err)
		}
		got, err := archive.CountEligible(ctx, f, 1000)
		if err != nil || got != (deadletter.MatchCount{N: want}) {
			t.Errorf("CountEligible(%s) = %+v, %v; letters_matching gives %d", sel, got, err, want)
		}
		all, _ := archive.CountMatching(ctx, f, 1000)
		t.Logf("%s: %d eligible of %d matching", sel, got.N, all.N)
	}
}
