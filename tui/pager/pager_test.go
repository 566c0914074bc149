package pager

import (
	"errors"
	"slices"
	"testing"
)

// source is a listing of n ints; the cursor is the last value returned.
func page(n, after, size int) Page[int, int] {
	var p Page[int, int]
	for v := after + 1; v <= n && len(p.Rows) < size; v++ {
		p.Rows = append(p.Rows, v)
	}
	if len(p.Rows) == size && p.Rows[size-1] < n {
		last := p.Rows[size-1]
		p.Next = &last
	}
	return p
}

func answer(w *Window[int, int], r Request[int], n int) {
	after := 0
	if r.After != nil {
		after = *r.After
	}
	w.Apply(r, page(n, after, w.PageSize()), nil)
}

func rows(w *Window[int, int]) []int {
	var out []int
	for i := w.Base(); i < w.End(); i++ {
		v, _ := w.Row(i)
		out = append(out, v)
	}
	return out
}

func TestWindowScrollsThroughBoundedPages(t *testing.T) {
	t.Parallel()
	const n = 1000
	w := New[int, int](10, 3)
	answer(w, w.Reset(), n)
	fetches := 1
	for cursor := 0; cursor < n; cursor++ {
		if r, ok := w.Want(cursor, 5); ok {
			if r.Front {
				t.Fatalf("cursor %d moving down asked for a page in front", cursor)
			}
			answer(w, r, n)
			fetches++
		}
		if v, ok := w.Row(cursor); !ok || v != cursor+1 {
			t.Fatalf("row %d = %d, %v; want %d", cursor, v, ok, cursor+1)
		}
		if w.Pages() > 3 {
			t.Fatalf("%d pages in memory, want at most 3", w.Pages())
		}
	}
	if !w.Complete() || fetches != n/10 {
		t.Errorf("complete=%v after %d fetches, want true after %d", w.Complete(), fetches, n/10)
	}
	// Back up to the top: dropped pages come back in front, by their cursors.
	for cursor := n - 1; cursor >= 0; cursor-- {
		if r, ok := w.Want(cursor, 5); ok {
			answer(w, r, n)
		}
		if v, ok := w.Row(cursor); !ok || v != cursor+1 {
			t.Fatalf("on the way up row %d = %d, %v; want %d", cursor, v, ok, cursor+1)
		}
	}
	if w.Base() != 0 {
		t.Errorf("base = %d at the top, want 0", w.Base())
	}
}

func TestWindowRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// steps: cursor positions to ask for, each answered at once
		steps       []int
		wantRows    []int
		wantPending bool
	}{
		{name: "first page only", steps: nil, wantRows: []int{1, 2, 3, 4}},
		{name: "near end fetches next", steps: []int{2}, wantRows: []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "third page drops first", steps: []int{2, 6}, wantRows: []int{5, 6, 7, 8, 9, 10, 11, 12}},
		{name: "back up refetches first", steps: []int{2, 6, 4}, wantRows: []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "end of listing", steps: []int{2, 6, 10, 14, 18}, wantRows: []int{13, 14, 15, 16, 17, 18, 19, 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := New[int, int](4, 2)
			answer(w, w.Reset(), 20)
			for _, c := range tt.steps {
				if r, ok := w.Want(c, 2); ok {
					answer(w, r, 20)
				}
			}
			if got := rows(w); !slices.Equal(got, tt.wantRows) {
				t.Errorf("rows = %v, want %v", got, tt.wantRows)
			}
		})
	}
}

func TestWindowIgnoresStaleAndRetriesFailed(t *testing.T) {
	t.Parallel()
	w := New[int, int](4, 2)
	old := w.Reset()
	fresh := w.Reset()
	if w.Apply(old, page(20, 0, 4), nil) {
		t.Fatal("an answer for a listing reset since was applied")
	}
	if !w.Apply(fresh, Page[int, int]{}, errors.New("connection refused")) || !w.Failed() {
		t.Fatal("a failed fetch was not recorded")
	}
	if _, ok := w.Want(0, 2); ok {
		t.Fatal("Want asked again while a failure waits for Retry")
	}
	r, ok := w.Retry()
	if !ok || r.After != nil || r.Front {
		t.Fatalf("Retry = %+v, %v; want the first page again", r, ok)
	}
	answer(w, r, 20)
	if got := rows(w); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("rows after retry = %v", got)
	}
}

// TestWindowHeadReplacesTheFirstPage: at the head of a listing, the first
// page fetched again replaces what is loaded, new rows first; scrolled past
// it, the window is left alone.
func TestWindowHeadReplacesTheFirstPage(t *testing.T) {
	t.Parallel()
	w := New[int, int](4, 2)
	answer(w, w.Reset(), 20)
	r, ok := w.Head()
	if !ok || !r.Head || r.After != nil {
		t.Fatalf("Head = %+v, %v; want the first page again", r, ok)
	}
	if _, again := w.Head(); again {
		t.Fatal("Head asked again while its fetch is under way")
	}
	// Two rows arrived at the head since: the listing now starts at -1.
	w.Apply(r, Page[int, int]{Rows: []int{-1, 0, 1, 2}, Next: new(int)}, nil)
	if got := rows(w); !slices.Equal(got, []int{-1, 0, 1, 2}) {
		t.Errorf("rows after Head = %v", got)
	}
	next, _ := w.Want(3, 2)
	answer(w, next, 20)
	if _, ok := w.Head(); ok {
		t.Error("Head offered with two pages loaded: rows would move under the reader")
	}
}
