package audit

import (
	"strconv"
	"testing"
)

// BenchmarkCountMillion is what a whole-trail verification adds to count a
// million rows of distinct targets (the bench's trail) and hash their count
// tree.
func BenchmarkCountMillion(b *testing.B) {
	actions := []string{"dlq.list", "dlq.show", "dlq.ingest.batch", "dlq.summary", "replay.request"}
	targets := make([][]byte, 1_000_000)
	for i := range targets {
		targets[i] = []byte("dead_letter:" + strconv.Itoa(i+1))
	}
	b.ResetTimer()
	for range b.N {
		t := newCountTally(1_000_000)
		for i, target := range targets {
			seq := int64(i + 1)
			add3(t, seq, []byte(actions[seq%5]), []byte("oncall"), target)
		}
		_, _ = countTreeOf(t).root()
	}
}

// TestCountTreeOfATallyIsTheTreeOfItsLeaves: the tree a tally builds from
// its own bytes is the one its leaves give added one by one, and proves
// each value, present or not, against its root.
func TestCountTreeOfATallyIsTheTreeOfItsLeaves(t *testing.T) {
	tally := newCountTally(0)
	for seq := int64(1); seq <= 3000; seq++ {
		add3(tally, seq, "dlq.show", []string{"alice", "bob", "ünï"}[seq%3], "dead_letter:"+strconv.FormatInt(seq%1700, 10))
	}
	whole := countTreeOf(tally)
	// Settled many times on the way, as a long trail is.
	often := newCountTally(0)
	often.settleAt = 97
	for seq := int64(1); seq <= 3000; seq++ {
		add3(often, seq, "dlq.show", []string{"alice", "bob", "ünï"}[seq%3], "dead_letter:"+strconv.FormatInt(seq%1700, 10))
		if len(often.pending) == 0 {
			often.settleAt = 97
		}
	}
	if a, b := mustRoot(t, whole), mustRoot(t, countTreeOf(often)); a != b {
		t.Fatalf("settled once %s, settled often %s", a.Root, b.Root)
	}
	byHand := newCountTree(true)
	var dirty []int
	for _, l := range tally.leaves() {
		b, err := byHand.add(l.Field, l.Value, l.Count, l.Newest)
		if err != nil {
			t.Fatal(err)
		}
		dirty = append(dirty, b)
	}
	if err := byHand.rehash(dirty); err != nil {
		t.Fatal(err)
	}
	a, _ := whole.root()
	b, _ := byHand.root()
	if a != b {
		t.Fatalf("roots %s and %s", a.Root, b.Root)
	}
	for _, c := range []struct {
		field, value  string
		count, newest int64
	}{{"actor", "ünï", 1000, 2999}, {"target", "dead_letter:5", 2, 1705}, {"target", "dead_letter:9999", 0, 0}, {"action", "", 0, 0}} {
		p, err := whole.prove(c.field, c.value)
		if err != nil {
			t.Fatal(err)
		}
		claim, err := checkCountProof(a, c.field, c.value, p)
		if err != nil || claim.Count != c.count || claim.Newest != c.newest {
			t.Errorf("%s %q: %+v, %v; want %d rows, the newest %d", c.field, c.value, claim, err, c.count, c.newest)
		}
	}
}

func mustRoot(t *testing.T, tree *countTree) CountsHead {
	t.Helper()
	h, err := tree.root()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
