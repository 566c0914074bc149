// Package pager keeps a bounded window of a keyset-paged listing in memory,
// so that a screen can scroll through a million rows while holding a few
// pages: pages are fetched ahead as the cursor nears the end of what is
// loaded, and dropped from the other end beyond MaxPages. A dropped page is
// fetched again by the cursor that first fetched it, so scrolling back up
// works too; only those cursors (a few bytes each) are kept for the pages
// scrolled past.
//
// A Window does no I/O. It says which page it wants (Want) and takes the
// result (Apply); the screen turns the request into a tea.Cmd.
package pager

// Page is one fetched page: its rows and the cursor that continues after the
// last of them, nil when there is nothing more.
type Page[R, C any] struct {
	Rows []R
	Next *C
}

// Request is a page the window wants: the one after After (nil: the first),
// to go in front of what is loaded when Front. Gen ties the answer to the
// listing it was asked for: answers for an older listing are ignored.
type Request[C any] struct {
	Gen   int
	After *C
	Front bool
	// Head asks the first page again, to replace what is loaded: rows
	// that arrived since the listing started show up at its head.
	Head bool
}

type loaded[R, C any] struct {
	after *C
	rows  []R
	next  *C
}

// Window is the loaded part of a listing. The zero value is not usable:
// make one with New.
type Window[R, C any] struct {
	pageSize int
	maxPages int
	pages    []loaded[R, C]
	// dropped are the after-cursors of pages dropped from the front,
	// oldest first.
	dropped []*C
	// base is the absolute index of the first loaded row.
	base    int
	gen     int
	pending *Request[C]
	failed  *Request[C]
	started bool
}

// New returns an empty window that fetches pageSize rows at a time and keeps
// at most maxPages pages.
func New[R, C any](pageSize, maxPages int) *Window[R, C] {
	return &Window[R, C]{pageSize: max(1, pageSize), maxPages: max(2, maxPages)}
}

// PageSize is the number of rows asked for per page.
func (w *Window[R, C]) PageSize() int { return w.pageSize }

// Reset forgets everything (a new filter or order) and returns the request
// for the first page.
func (w *Window[R, C]) Reset() Request[C] {
	w.gen++
	w.pages, w.dropped, w.base, w.failed = nil, nil, 0, nil
	w.started = true
	r := Request[C]{Gen: w.gen}
	w.pending = &r
	return r
}

// Started reports whether Reset was called at least once.
func (w *Window[R, C]) Started() bool { return w.started }

// Base is the absolute index of the first loaded row.
func (w *Window[R, C]) Base() int { return w.base }

// End is the absolute index just past the last loaded row.
func (w *Window[R, C]) End() int {
	n := w.base
	for _, p := range w.pages {
		n += len(p.rows)
	}
	return n
}

// Loaded is the number of rows in memory.
func (w *Window[R, C]) Loaded() int { return w.End() - w.base }

// Pages is the number of pages in memory.
func (w *Window[R, C]) Pages() int { return len(w.pages) }

// Complete reports whether the last page of the listing is loaded.
func (w *Window[R, C]) Complete() bool {
	return len(w.pages) > 0 && w.pages[len(w.pages)-1].next == nil
}

// Loading reports whether a page is being fetched.
func (w *Window[R, C]) Loading() bool { return w.pending != nil }

// Failed reports whether the last fetch failed (and Retry would repeat it).
func (w *Window[R, C]) Failed() bool { return w.failed != nil }

// Row returns the row at absolute index i, if loaded.
func (w *Window[R, C]) Row(i int) (R, bool) {
	var zero R
	if i < w.base {
		return zero, false
	}
	i -= w.base
	for _, p := range w.pages {
		if i < len(p.rows) {
			return p.rows[i], true
		}
		i -= len(p.rows)
	}
	return zero, false
}

// Want returns the page to fetch for a cursor at absolute index cursor, when
// it is within margin rows of either end of what is loaded and more exists
// that way; ok is false when nothing is needed or a fetch is already under
// way.
func (w *Window[R, C]) Want(cursor, margin int) (Request[C], bool) {
	if w.pending != nil || w.failed != nil || len(w.pages) == 0 {
		return Request[C]{}, false
	}
	if cursor >= w.End()-margin && !w.Complete() {
		r := Request[C]{Gen: w.gen, After: w.pages[len(w.pages)-1].next}
		w.pending = &r
		return r, true
	}
	if cursor < w.base+margin && len(w.dropped) > 0 {
		r := Request[C]{Gen: w.gen, After: w.dropped[len(w.dropped)-1], Front: true}
		w.pending = &r
		return r, true
	}
	return Request[C]{}, false
}

// Head returns the request that fetches the first page again, to replace
// what is loaded by it (Apply), when the window is at the head of the
// listing and holds its first page only: further down, replacing would
// move rows under a reader who scrolled. ok is false otherwise, or when
// a fetch is under way or failed.
func (w *Window[R, C]) Head() (Request[C], bool) {
	if w.pending != nil || w.failed != nil || len(w.pages) != 1 || w.base != 0 {
		return Request[C]{}, false
	}
	r := Request[C]{Gen: w.gen, Head: true}
	w.pending = &r
	return r, true
}

// Retry returns the request that failed last, to try it again.
func (w *Window[R, C]) Retry() (Request[C], bool) {
	if w.failed == nil || w.pending != nil {
		return Request[C]{}, false
	}
	r := *w.failed
	w.failed = nil
	w.pending = &r
	return r, true
}

// Apply takes the answer to r. It reports false, and changes nothing, when r
// belongs to a listing that was Reset since.
func (w *Window[R, C]) Apply(r Request[C], p Page[R, C], err error) bool {
	if r.Gen != w.gen {
		return false
	}
	w.pending = nil
	if err != nil {
		w.failed = &r
		return true
	}
	w.failed = nil
	page := loaded[R, C]{after: r.After, rows: p.Rows, next: p.Next}
	if r.Head {
		w.pages, w.dropped, w.base = []loaded[R, C]{page}, nil, 0
		return true
	}
	if r.Front {
		w.dropped = w.dropped[:len(w.dropped)-1]
		w.base -= len(p.Rows)
		if len(w.dropped) == 0 || w.base < 0 {
			// Back at the top: whatever changed meanwhile, the first page
			// starts the listing.
			w.base = 0
		}
		w.pages = append([]loaded[R, C]{page}, w.pages...)
		if len(w.pages) > w.maxPages {
			w.pages = w.pages[:w.maxPages]
		}
		return true
	}
	w.pages = append(w.pages, page)
	if len(w.pages) > w.maxPages {
		first := w.pages[0]
		w.dropped = append(w.dropped, first.after)
		w.base += len(first.rows)
		w.pages = w.pages[1:]
	}
	return true
}

// Update calls fn on every loaded row, to apply a change the screen knows of
// (a letter that joined a request) without fetching again.
func (w *Window[R, C]) Update(fn func(*R)) {
	for i := range w.pages {
		for j := range w.pages[i].rows {
			fn(&w.pages[i].rows[j])
		}
	}
}
