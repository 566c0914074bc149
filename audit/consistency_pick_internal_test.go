package audit

import (
	"slices"
	"testing"
)

// TestPickConsistencySizes: the newest earlier checkpoints, then one at or
// below each halving of the size, at most maxConsistencyProofs.
func TestPickConsistencySizes(t *testing.T) {
	t.Parallel()
	var stored []int64
	for n := int64(10_000); n >= 10; n -= 10 { // a checkpoint every 10 rows
		stored = append(stored, n)
	}
	got := pickConsistencySizes(stored, 10_010)
	want := []int64{10_000, 9_990, 9_980, 9_970, 9_960, 9_950, 9_940, 9_930, 5_000, 2_500, 1_250, 620, 310, 150, 70, 30}
	if !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v", got, want)
	}
	if got := pickConsistencySizes([]int64{7, 3}, 8); !slices.Equal(got, []int64{7, 3}) {
		t.Fatalf("picked %v from two", got)
	}
}
