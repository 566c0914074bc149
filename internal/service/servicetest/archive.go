package servicetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
)

// OldestArchive is the archive the archive contract holds: a
// service.Archive that also lists oldest first, as *deadletter.Archive
// does and the terminal UI's "oldest first" sort needs.
type OldestArchive interface {
	service.Archive
	service.OldestLister
}

// LetterSpec is what an archive case chooses of one letter. The contract
// fills in every field a case leaves empty before the world sees it, so a
// world only translates a spec, field by field, into its own rows.
type LetterSpec struct {
	// Age is how long before the world's Now the letter was dead-lettered.
	Age time.Duration
	// Category is its reason category; empty: transient-exhausted.
	Category deadletter.Category
	// Queue is the dead-letter queue it was captured from; empty: q.dlq.
	Queue string
	// Status is where it stands after capture; empty: dead.
	Status deadletter.Status
	// The searchable text. Empty: res-<i>, m-<i>, job-<i> (also its job
	// key, so no two letters of a case are incarnations of one job),
	// db_timeout and "timeout after 5s", for the case's i-th letter.
	ReservationID, MessageID, IdempotencyKey, ErrorClass, LastError string
	// Attempts is how often it was processed; zero: 3.
	Attempts int
	// DueAt is the hold's business deadline; the zero time: none.
	DueAt time.Time
}

// filled returns s with the defaults of the case's i-th letter.
func (s LetterSpec) filled(i int) LetterSpec {
	orElse := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	if s.Category == "" {
		s.Category = deadletter.TransientExhausted
	}
	if s.Status == "" {
		s.Status = deadletter.StatusDead
	}
	orElse(&s.Queue, "q.dlq")
	orElse(&s.ReservationID, fmt.Sprintf("res-%d", i))
	orElse(&s.MessageID, fmt.Sprintf("m-%d", i))
	orElse(&s.IdempotencyKey, fmt.Sprintf("job-%d", i))
	orElse(&s.ErrorClass, "db_timeout")
	orElse(&s.LastError, "timeout after 5s")
	if s.Attempts == 0 {
		s.Attempts = 3
	}
	return s
}

// ArchiveWorld is one archive case's implementation: a clock and a way to
// fill the archive.
type ArchiveWorld struct {
	// Now is the clock letters' ages count back from: the database's when
	// the world was made, or the fake's Epoch. Signals time arrivals and
	// overdue holds by the implementation's own clock, which for a
	// database runs on from Now: cases keep a minute's margin from every
	// window's edge.
	Now time.Time
	// Seed archives one letter per spec, every field filled in, in order
	// and with ascending ids, and returns the archive over them, read as
	// a person who is neither superuser nor owner, and their ids. A case
	// seeds once.
	Seed func(specs ...LetterSpec) (OldestArchive, []int64)
}

// Archive runs the archive contract: each case gets a world of its own
// from newWorld.
func Archive(t *testing.T, newWorld func(t *testing.T) ArchiveWorld) {
	runCases(t, seedingDefaults(newWorld), []contractCase[ArchiveWorld]{
		{"ListPagesNewestFirstByKeyset", archiveListPages},
		{"ListOldestPagesOldestFirstByKeyset", archiveListOldestPages},
		{"FiltersKeepCategoriesQueueStatusAndWindow", archiveFilters},
		{"SearchIsASubstringOfOneFieldInAnyCase", archiveSearch},
		{"StreamEmitsWhatPagingListsAndStopsOnError", archiveStream},
		{"ShowCarriesTheRowAndAMissingIDIsNotFound", archiveShow},
		{"SummaryCountsWaitingAndTotalPerCategory", archiveSummary},
		{"SignalsCountStatusesArrivalsAndOverdue", archiveSignals},
	})
}

// seedingDefaults wraps newWorld so that each spec a case seeds is filled
// in first, and checks the world seeded one letter each, ids ascending.
func seedingDefaults(newWorld func(t *testing.T) ArchiveWorld) func(t *testing.T) ArchiveWorld {
	return func(t *testing.T) ArchiveWorld {
		w := newWorld(t)
		seed := w.Seed
		w.Seed = func(specs ...LetterSpec) (OldestArchive, []int64) {
			t.Helper()
			full := make([]LetterSpec, len(specs))
			for i, s := range specs {
				full[i] = s.filled(i)
			}
			a, ids := seed(full...)
			if len(ids) != len(specs) || !slices.IsSorted(ids) {
				t.Fatalf("world seeded ids %v for %d letters, want one each, ascending", ids, len(specs))
			}
			return a, ids
		}
		return w
	}
}

// lister is one listing order of an archive: List or ListOldest.
type lister func(ctx context.Context, f deadletter.Filter, after *deadletter.Cursor, limit int) (deadletter.Page, error)

// pageThrough lists every match of f, limit at a time, from after, with
// the cursor of each page through its text form (as between two
// commands). It fails unless every page but the last is full, each Next is
// its page's last row, and only the last page, the one that reaches the
// end, has no Next (an exact multiple of limit ends without an empty
// page). It returns the pages' ids.
func pageThrough(t *testing.T, list lister, f deadletter.Filter, after *deadletter.Cursor, limit int) [][]int64 {
	t.Helper()
	var pages [][]int64
	for {
		page, err := list(context.Background(), f, after, limit)
		if err != nil {
			t.Fatalf("page %d (limit %d): %v", len(pages)+1, limit, err)
		}
		pages = append(pages, rowIDs(page.Rows))
		if page.Next == nil {
			return pages
		}
		last := page.Rows[len(page.Rows)-1]
		if len(page.Rows) != limit || page.Next.ID != last.ID || !page.Next.DeadLetteredAt.Equal(last.DeadLetteredAt) {
			t.Fatalf("page %d of %d rows (limit %d) continues at %+v, want a full page continuing at its last row (%d at %v)",
				len(pages), len(page.Rows), limit, *page.Next, last.ID, last.DeadLetteredAt)
		}
		c, err := deadletter.ParseCursor(page.Next.String())
		if err != nil {
			t.Fatal(err)
		}
		after = &c
		if len(pages) > 100 {
			t.Fatalf("more than 100 pages of %d: %v", limit, pages)
		}
	}
}

func rowIDs(rows []deadletter.Row) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// pick returns the ids of the letters at positions at, in that order.
func pick(ids []int64, at ...int) []int64 {
	out := make([]int64, len(at))
	for i, n := range at {
		out[i] = ids[n]
	}
	return out
}

// wantPages fails unless the pages hold exactly want, in order.
func wantPages(t *testing.T, what string, pages [][]int64, want ...[]int64) {
	t.Helper()
	if !slices.EqualFunc(pages, want, slices.Equal[[]int64]) {
		t.Fatalf("%s: pages %v, want %v", what, pages, want)
	}
}

// cursorAt is the cursor of the letter with id, seeded age before now.
func cursorAt(now time.Time, age time.Duration, id int64) *deadletter.Cursor {
	return &deadletter.Cursor{DeadLetteredAt: now.Add(-age), ID: id}
}

// keysetSpecs are seven letters with a tie of three at 30 minutes and the
// oldest seeded last, so that id order and time order differ.
func keysetSpecs() []LetterSpec {
	minutes := []int{50, 40, 30, 30, 30, 20, 60}
	specs := make([]LetterSpec, len(minutes))
	for i, m := range minutes {
		specs[i] = LetterSpec{Age: time.Duration(m) * time.Minute}
	}
	return specs
}

func archiveListPages(t *testing.T, w ArchiveWorld) {
	a, ids := w.Seed(keysetSpecs()...)
	// Newest first; of the three at 30 minutes, the highest id first.
	order := []int{5, 4, 3, 2, 1, 0, 6}
	wantPages(t, "limit 2", pageThrough(t, a.List, deadletter.Filter{}, nil, 2),
		pick(ids, 5, 4), pick(ids, 3, 2), pick(ids, 1, 0), pick(ids, 6))
	wantPages(t, "limit 3", pageThrough(t, a.List, deadletter.Filter{}, nil, 3),
		pick(ids, 5, 4, 3), pick(ids, 2, 1, 0), pick(ids, 6))
	wantPages(t, "limit 7 (all of them)", pageThrough(t, a.List, deadletter.Filter{}, nil, 7), pick(ids, order...))
	wantPages(t, "limit 100", pageThrough(t, a.List, deadletter.Filter{}, nil, 100), pick(ids, order...))
	// A page of no letters is a caller's mistake, said as an error.
	for _, limit := range []int{0, -1} {
		if page, err := a.List(context.Background(), deadletter.Filter{}, nil, limit); err == nil {
			t.Errorf("List with limit %d = %d rows, want an error", limit, len(page.Rows))
		}
		if page, err := a.ListOldest(context.Background(), deadletter.Filter{}, nil, limit); err == nil {
			t.Errorf("ListOldest with limit %d = %d rows, want an error", limit, len(page.Rows))
		}
	}
	// A cursor inside the tie continues with the tie's lower ids.
	wantPages(t, "after the middle of the tie", pageThrough(t, a.List, deadletter.Filter{}, cursorAt(w.Now, 30*time.Minute, ids[3]), 10),
		pick(ids, 2, 1, 0, 6))
	// A cursor between letters continues with the older ones.
	wantPages(t, "after 35 minutes ago", pageThrough(t, a.List, deadletter.Filter{}, cursorAt(w.Now, 35*time.Minute, 0), 10),
		pick(ids, 1, 0, 6))
	wantPages(t, "after the oldest", pageThrough(t, a.List, deadletter.Filter{}, cursorAt(w.Now, time.Hour, ids[6]), 10), []int64{})
}

func archiveListOldestPages(t *testing.T, w ArchiveWorld) {
	a, ids := w.Seed(keysetSpecs()...)
	// Oldest first; of the three at 30 minutes, the lowest id first.
	order := []int{6, 0, 1, 2, 3, 4, 5}
	wantPages(t, "limit 2", pageThrough(t, a.ListOldest, deadletter.Filter{}, nil, 2),
		pick(ids, 6, 0), pick(ids, 1, 2), pick(ids, 3, 4), pick(ids, 5))
	wantPages(t, "limit 7 (all of them)", pageThrough(t, a.ListOldest, deadletter.Filter{}, nil, 7), pick(ids, order...))
	wantPages(t, "after the middle of the tie", pageThrough(t, a.ListOldest, deadletter.Filter{}, cursorAt(w.Now, 30*time.Minute, ids[3]), 10),
		pick(ids, 4, 5))
	wantPages(t, "after the newest", pageThrough(t, a.ListOldest, deadletter.Filter{}, cursorAt(w.Now, 20*time.Minute, ids[5]), 10), []int64{})
	// Filters apply in this order too.
	wantPages(t, "in the window", pageThrough(t, a.ListOldest,
		deadletter.Filter{Since: w.Now.Add(-40 * time.Minute), Until: w.Now.Add(-20 * time.Minute)}, nil, 2),
		pick(ids, 1, 2), pick(ids, 3, 4))
}

func archiveFilters(t *testing.T, w ArchiveWorld) {
	val, con, nf := deadletter.Validation, deadletter.Conflict, deadletter.NotFound
	a, ids := w.Seed(
		LetterSpec{Age: 50 * time.Minute, Category: val, Queue: "a.dlq"},
		LetterSpec{Age: 40 * time.Minute, Category: con, Queue: "b.dlq", Status: deadletter.StatusReplayed},
		LetterSpec{Age: 30 * time.Minute, Category: val, Queue: "b.dlq", Status: deadletter.StatusInRequest},
		LetterSpec{Age: 20 * time.Minute, Category: nf, Queue: "a.dlq", Status: deadletter.StatusDiscarded},
		LetterSpec{Age: 10 * time.Minute, Category: con, Queue: "a.dlq"},
	)
	ago := func(minutes int) time.Time { return w.Now.Add(-time.Duration(minutes) * time.Minute) }
	for _, c := range []struct {
		name string
		f    deadletter.Filter
		want []int
	}{
		{"two categories", deadletter.Filter{Categories: []deadletter.Category{val, con}}, []int{4, 2, 1, 0}},
		{"queue", deadletter.Filter{Queue: "a.dlq"}, []int{4, 3, 0}},
		{"status dead", deadletter.Filter{Status: deadletter.StatusDead}, []int{4, 0}},
		{"status in_request", deadletter.Filter{Status: deadletter.StatusInRequest}, []int{2}},
		{"category and queue", deadletter.Filter{Categories: []deadletter.Category{con}, Queue: "a.dlq"}, []int{4}},
		// Since is inclusive and Until exclusive.
		{"since 40m until 20m ago", deadletter.Filter{Since: ago(40), Until: ago(20)}, []int{2, 1}},
		{"since 30m ago", deadletter.Filter{Since: ago(30)}, []int{4, 3, 2}},
		{"until 30m ago", deadletter.Filter{Until: ago(30)}, []int{1, 0}},
		{"window and status", deadletter.Filter{Since: ago(60), Until: ago(15), Status: deadletter.StatusDead}, []int{0}},
		{"an unknown queue", deadletter.Filter{Queue: "c.dlq"}, nil},
	} {
		page, err := a.List(context.Background(), c.f, nil, 100)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := rowIDs(page.Rows), pick(ids, c.want...); !slices.Equal(got, want) || page.Next != nil {
			t.Errorf("%s: listed %v (next %v), want %v and no next page", c.name, got, page.Next, want)
		}
		// `dlq list -o json` writes the rows as they come: none is [], not null.
		if page.Rows == nil {
			t.Errorf("%s: a page's rows are nil, want an empty list", c.name)
		}
	}
}

func archiveSearch(t *testing.T, w ArchiveWorld) {
	a, ids := w.Seed(
		LetterSpec{Age: 3 * time.Minute, ReservationID: "res-alpha-7", ErrorClass: "db_timeout", LastError: "timeout talking to shard 3"},
		LetterSpec{Age: 2 * time.Minute, ReservationID: "res-beta-8", ErrorClass: "version_conflict", LastError: "expected version 3, found 4"},
		LetterSpec{Age: 1 * time.Minute, ReservationID: "RES-ALPHA-9", ErrorClass: "not_found", LastError: "reservation gone"},
	)
	for _, c := range []struct {
		search string
		want   []int
	}{
		{"alpha", []int{2, 0}}, // the reservation id, either case
		{"ALPHA", []int{2, 0}},
		{"Conflict", []int{1}},      // the error class
		{"SHARD 3", []int{0}},       // the last error
		{"m-1", []int{1}},           // the message id
		{"JOB-2", []int{2}},         // the idempotency key
		{"%", nil},                  // a literal percent sign, which no letter has
		{"res_alpha", nil},          // an underscore is itself, not any character
		{"db_timeout timeout", nil}, // one field's substring, not two fields' joined
	} {
		page, err := a.List(context.Background(), deadletter.Filter{Search: c.search}, nil, 100)
		if err != nil {
			t.Fatalf("search %q: %v", c.search, err)
		}
		if got, want := rowIDs(page.Rows), pick(ids, c.want...); !slices.Equal(got, want) {
			t.Errorf("search %q listed %v, want %v", c.search, got, want)
		}
	}
}

func archiveStream(t *testing.T, w ArchiveWorld) {
	a, ids := w.Seed(append(keysetSpecs(),
		LetterSpec{Age: 30 * time.Minute, Category: deadletter.Conflict},
		LetterSpec{Age: 45 * time.Minute, Category: deadletter.Conflict})...)
	ctx := context.Background()
	stream := func(f deadletter.Filter, after *deadletter.Cursor) []int64 {
		t.Helper()
		got := []int64{}
		if err := a.Stream(ctx, f, after, func(r deadletter.Row) error { got = append(got, r.ID); return nil }); err != nil {
			t.Fatalf("stream %+v after %v: %v", f, after, err)
		}
		return got
	}
	for _, c := range []struct {
		name  string
		f     deadletter.Filter
		after *deadletter.Cursor
	}{
		{"everything", deadletter.Filter{}, nil},
		{"a category", deadletter.Filter{Categories: []deadletter.Category{deadletter.Conflict}}, nil},
		{"after a cursor in the tie", deadletter.Filter{}, cursorAt(w.Now, 30*time.Minute, ids[3])},
		{"a window", deadletter.Filter{Since: w.Now.Add(-45 * time.Minute), Until: w.Now.Add(-30 * time.Minute)}, nil},
	} {
		listed := slices.Concat(pageThrough(t, a.List, c.f, c.after, 2)...)
		if got := stream(c.f, c.after); !slices.Equal(got, listed) {
			t.Errorf("%s: streamed %v, paging lists %v", c.name, got, listed)
		}
	}
	if got, want := stream(deadletter.Filter{Categories: []deadletter.Category{deadletter.Conflict}}, nil), pick(ids, 7, 8); !slices.Equal(got, want) {
		t.Errorf("streamed conflicts %v, want %v", got, want)
	}

	// An error from emit ends the stream and comes back.
	stop := errors.New("reader went away")
	var emitted int
	err := a.Stream(ctx, deadletter.Filter{}, nil, func(deadletter.Row) error {
		emitted++
		if emitted == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || emitted != 2 {
		t.Fatalf("emit failing on the second letter: stream returned %v after %d letters, want that error after 2", err, emitted)
	}
}

// sameRow reports whether a and b are the same letter, field by field,
// times by instant.
func sameRow(a, b deadletter.Row) bool {
	sameAt := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	sameID := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ID == b.ID && a.MessageID == b.MessageID && a.ReservationID == b.ReservationID &&
		a.IdempotencyKey == b.IdempotencyKey && a.Category == b.Category && a.ErrorClass == b.ErrorClass &&
		a.Attempts == b.Attempts && a.Status == b.Status && a.SourceQueue == b.SourceQueue &&
		a.DeadLetteredAt.Equal(b.DeadLetteredAt) && sameAt(a.DueAt, b.DueAt) && a.LastError == b.LastError &&
		sameID(a.PreviousID, b.PreviousID) && sameID(a.ReplayRequestID, b.ReplayRequestID)
}

func archiveShow(t *testing.T, w ArchiveWorld) {
	due := w.Now.Add(-time.Hour)
	specs := []LetterSpec{
		{Age: 3 * time.Minute, Category: deadletter.Validation, Queue: "a.dlq", ErrorClass: "validation", Attempts: 1},
		{Age: 2 * time.Minute, Status: deadletter.StatusReplayed, DueAt: due, LastError: "timeout talking to shard 3", Attempts: 5},
		{Age: time.Minute, Status: deadletter.StatusInRequest, ReservationID: "res-shown"},
	}
	a, ids := w.Seed(specs...)
	ctx := context.Background()
	page, err := a.List(ctx, deadletter.Filter{}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[int64]deadletter.Row{}
	for _, r := range page.Rows {
		listed[r.ID] = r
	}
	for i, id := range ids {
		d, err := a.Show(ctx, id)
		if err != nil {
			t.Fatalf("show %d: %v", id, err)
		}
		if !sameRow(d.Row, listed[id]) {
			t.Errorf("show %d: row %+v, listed as %+v", id, d.Row, listed[id])
		}
		s := specs[i].filled(i)
		r := d.Row
		if r.ID != id || r.Category != s.Category || r.SourceQueue != s.Queue || r.Status != s.Status ||
			r.ReservationID != s.ReservationID || r.MessageID != s.MessageID || r.IdempotencyKey != s.IdempotencyKey ||
			r.ErrorClass != s.ErrorClass || r.LastError != s.LastError || r.Attempts != s.Attempts ||
			!r.DeadLetteredAt.Equal(w.Now.Add(-s.Age)) || !dueIs(r.DueAt, s.DueAt) {
			t.Errorf("show %d: row %+v, want the letter seeded as %+v", id, r, s)
		}
		if len(d.Payload) == 0 || d.PayloadSize != len(d.Payload) {
			t.Errorf("show %d: a payload of %d bytes said to be %d", id, len(d.Payload), d.PayloadSize)
		}
	}

	missing := ids[len(ids)-1] + 1000
	_, err = a.Show(ctx, missing)
	if nf, ok := errors.AsType[*deadletter.NotFoundError](err); !ok || nf.ID != missing || !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("show of missing letter %d: %v (%T), want a *deadletter.NotFoundError naming it", missing, err, err)
	}
}

// dueIs reports whether a letter's due time is want (the zero time: none).
func dueIs(got *time.Time, want time.Time) bool {
	if want.IsZero() {
		return got == nil
	}
	return got != nil && got.Equal(want)
}

func archiveSummary(t *testing.T, w ArchiveWorld) {
	te, val, con := deadletter.TransientExhausted, deadletter.Validation, deadletter.Conflict
	a, _ := w.Seed(
		LetterSpec{Age: 50 * time.Minute, Category: val, Queue: "a.dlq"},
		// Older, but replayed: neither the oldest waiting nor its queue.
		LetterSpec{Age: 60 * time.Minute, Category: val, Queue: "b.dlq", Status: deadletter.StatusReplayed},
		LetterSpec{Age: 40 * time.Minute, Category: val, Queue: "c.dlq", Status: deadletter.StatusInRequest},
		LetterSpec{Age: 10 * time.Minute, Category: con, Queue: "a.dlq", Status: deadletter.StatusDiscarded},
		LetterSpec{Age: 30 * time.Minute, Category: te, Queue: "b.dlq"},
		LetterSpec{Age: 20 * time.Minute, Category: te, Queue: "b.dlq"},
	)
	got, err := a.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ago := func(minutes int) *time.Time { at := w.Now.Add(-time.Duration(minutes) * time.Minute); return &at }
	// In the order of deadletter.Categories; a category with letters but
	// none waiting still has its line.
	want := []deadletter.CategorySummary{
		{Category: te, Count: 2, Total: 2, OldestDeadLetteredAt: ago(30), Queues: []string{"b.dlq"}},
		{Category: val, Count: 2, Total: 3, OldestDeadLetteredAt: ago(50), Queues: []string{"a.dlq", "c.dlq"}},
		{Category: con, Count: 0, Total: 1, OldestDeadLetteredAt: nil, Queues: []string{}},
	}
	same := func(x, y deadletter.CategorySummary) bool {
		oldest := x.OldestDeadLetteredAt == nil && y.OldestDeadLetteredAt == nil ||
			x.OldestDeadLetteredAt != nil && y.OldestDeadLetteredAt != nil && x.OldestDeadLetteredAt.Equal(*y.OldestDeadLetteredAt)
		// Queues are a list, never null, in `dlq summary -o json`.
		return x.Category == y.Category && x.Count == y.Count && x.Total == y.Total && oldest &&
			slices.Equal(x.Queues, y.Queues) && x.Queues != nil
	}
	if !slices.EqualFunc(got, want, same) {
		t.Fatalf("summary\n%s\nwant\n%s", summaryText(got), summaryText(want))
	}
}

func summaryText(lines []deadletter.CategorySummary) string {
	var out string
	for _, l := range lines {
		oldest := "none"
		if l.OldestDeadLetteredAt != nil {
			oldest = l.OldestDeadLetteredAt.Format(time.RFC3339Nano)
		}
		out += fmt.Sprintf("  %s: %d of %d waiting, oldest %s, queues %#v\n", l.Category, l.Count, l.Total, oldest, l.Queues)
	}
	return out
}

func archiveSignals(t *testing.T, w ArchiveWorld) {
	te, val, con := deadletter.TransientExhausted, deadletter.Validation, deadletter.Conflict
	ago := func(d time.Duration) time.Time { return w.Now.Add(-d) }
	// A minute at least from every window's edge (see ArchiveWorld.Now).
	a, _ := w.Seed(
		LetterSpec{Age: time.Minute, Category: te, DueAt: ago(2 * time.Hour)}, // overdue
		LetterSpec{Age: 3 * time.Minute, Category: te, Status: deadletter.StatusReplayed, DueAt: ago(3 * time.Hour)},
		LetterSpec{Age: 30 * time.Minute, Category: te, Status: deadletter.StatusInRequest, DueAt: ago(-time.Hour)},
		LetterSpec{Age: 3 * time.Hour, Category: val, Status: deadletter.StatusDiscarded},
		LetterSpec{Age: 2 * time.Hour, Category: val, DueAt: ago(30 * time.Minute)}, // overdue
		LetterSpec{Age: 30 * time.Hour, Category: con},
	)
	ctx := context.Background()
	type line struct {
		category               deadletter.Category
		last5m, last1h, last24 int64
		byStatus               [4]int64 // in the order of deadletter.Statuses
	}
	check := func(name string, s deadletter.Signals, arrivals [3]int64, overdue, permanent int64, want ...line) {
		t.Helper()
		if got := [3]int64{s.Arrivals.Last5m.Letters, s.Arrivals.Last1h.Letters, s.Arrivals.Last24h.Letters}; got != arrivals {
			t.Errorf("%s: arrivals in 5m, 1h, 24h %v, want %v (a replayed letter still arrived)", name, got, arrivals)
		}
		if s.Overdue.Count != overdue || s.Overdue.Permanent != permanent {
			t.Errorf("%s: %d overdue and %d failed for good, want %d and %d (waiting letters due before the clock, apart when a retry cannot fix them)",
				name, s.Overdue.Count, s.Overdue.Permanent, overdue, permanent)
		}
		var split int64
		for _, c := range s.Overdue.ByCategory {
			if c.Permanent != c.Category.Permanent() || c.Count == 0 || c.OldestDueAt == nil {
				t.Errorf("%s: overdue line %+v", name, c)
			}
			split += c.Count
		}
		if split != overdue+permanent {
			t.Errorf("%s: the overdue lines by category sum to %d, want %d", name, split, overdue+permanent)
		}
		var got []line
		for _, c := range s.Categories {
			l := line{category: c.Category, last5m: c.Arrivals.Last5m.Letters, last1h: c.Arrivals.Last1h.Letters, last24: c.Arrivals.Last24h.Letters}
			for i, st := range deadletter.Statuses() {
				n, ok := c.ByStatus[st]
				if !ok {
					t.Errorf("%s: %s counts no %s letters, want every status present: %v", name, c.Category, st, c.ByStatus)
				}
				l.byStatus[i] = n
			}
			got = append(got, l)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: categories\n %+v\nwant\n %+v", name, got, want)
		}
	}

	s, err := a.Signals(ctx, deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("unbounded", s, [3]int64{2, 3, 5}, 1, 1,
		line{te, 2, 3, 3, [4]int64{1, 1, 1, 0}},
		line{val, 0, 0, 2, [4]int64{1, 0, 0, 1}},
		line{con, 0, 0, 0, [4]int64{1, 0, 0, 0}})
	if want := ago(2 * time.Hour); s.Overdue.OldestDueAt == nil || !s.Overdue.OldestDueAt.Equal(want) {
		t.Errorf("unbounded: oldest due %v, want %v", s.Overdue.OldestDueAt, want)
	}

	// Since bounds the counts, not the arrival windows: validation's
	// letters are older than the bound but arrived in the last 24 hours,
	// so it keeps its line, with no letters in any status; conflict's is
	// gone.
	s, err = a.Signals(ctx, deadletter.SignalsOptions{Since: ago(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	check("since an hour ago", s, [3]int64{2, 3, 5}, 1, 0,
		line{te, 2, 3, 3, [4]int64{1, 1, 1, 0}},
		line{val, 0, 0, 2, [4]int64{}})

	if _, err := a.Signals(ctx, deadletter.SignalsOptions{Since: ago(time.Hour), Until: ago(2 * time.Hour)}); err == nil {
		t.Error("signals of an empty window (since after until) succeeded, want an error")
	}
}
