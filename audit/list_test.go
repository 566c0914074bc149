package audit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/audit"
)

func TestListPagesAndFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, head := newTrail(t, 40) // actors cycle alice, bob, oncall-ünïcode, ci; 1ms apart

	// Paging newest first, by seq, with no row twice and none skipped.
	var seen []int64
	var after *audit.Cursor
	for pages := 0; ; pages++ {
		page, err := audit.List(ctx, db.Pool, audit.Filter{}, after, 15)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			seen = append(seen, r.Seq)
		}
		if page.Next == nil {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		after = page.Next
	}
	if len(seen) != 40 || seen[0] != 40 || seen[39] != 1 {
		t.Fatalf("pages listed %v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]-1 {
			t.Fatalf("pages listed %v", seen)
		}
	}

	cases := []struct {
		name   string
		filter audit.Filter
		want   []int64
	}{
		{"actor", audit.Filter{Actor: "oncall-ünïcode"}, []int64{38, 34, 30}},
		{"action and actor", audit.Filter{Action: "dlq.show", Actor: "bob"}, []int64{21, 1}},
		{"target", audit.Filter{Target: "dead_letter:11"}, []int64{11}},
		{"since and until", audit.Filter{Since: seedEpoch.Add(10 * time.Millisecond), Until: seedEpoch.Add(13 * time.Millisecond)}, []int64{12, 11, 10}},
		{"nothing", audit.Filter{Actor: "nobody"}, nil},
	}
	for _, c := range cases {
		page, err := audit.List(ctx, db.Pool, c.filter, nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range page.Rows {
			got = append(got, r.Seq)
		}
		if !equalSeqs(got, c.want) {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.want)
		}
	}

	page, err := audit.List(ctx, db.Pool, audit.Filter{}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := page.Rows[0]
	if r.Seq != head.Seq || r.Hash != head.Hash {
		t.Fatalf("newest row %d %s, want the head %v", r.Seq, r.Hash, head)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	if at := obj["at"].(string); at != "2026-11-30T03:00:00.040005Z" {
		t.Errorf("at = %q, want six fractional digits in UTC", at)
	}
	if _, ok := obj["details"].(map[string]any); !ok {
		t.Errorf("details = %#v, want a JSON object", obj["details"])
	}
	if h := obj["hash"].(string); h != head.Hash.String() || strings.ToLower(h) != h {
		t.Errorf("hash = %q, want lowercase hex %s", h, head.Hash)
	}
}

func TestCursorAndAnchorParsing(t *testing.T) {
	t.Parallel()
	c, err := audit.ParseCursor(" 4812 ")
	if err != nil || c.Seq != 4812 || c.String() != "4812" {
		t.Fatalf("ParseCursor = %v, %v", c, err)
	}
	for _, bad := range []string{"", "0", "-3", "x"} {
		if _, err := audit.ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
	a, err := audit.ParseAnchor("42:9D3DCDE986E305427A7F96D76458D7B084E8DACBF90CAD4A824C877CE9CC0212")
	if err != nil || a.Seq != 42 || a.String() != "42:9d3dcde986e305427a7f96d76458d7b084e8dacbf90cad4a824c877ce9cc0212" {
		t.Fatalf("ParseAnchor = %v, %v", a, err)
	}
	for _, bad := range []string{"42", "42:abc", ":9d3d", "0:9d3dcde986e305427a7f96d76458d7b084e8dacbf90cad4a824c877ce9cc0212"} {
		if _, err := audit.ParseAnchor(bad); err == nil {
			t.Errorf("ParseAnchor(%q) accepted", bad)
		}
	}
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
