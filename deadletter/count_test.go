package deadletter_test

import (
	"context"
	"testing"

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
