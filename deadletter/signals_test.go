package deadletter_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// dbNow is the database's clock, which the signals are timed by: letters
// are seeded relative to it.
func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now.UTC()
}

// letterSpec is what a signals test chooses of a letter; the rest is
// seedLetter's.
type letterSpec struct {
	category deadletter.Category
	class    string
	attempts int
	deadAt   time.Time
	// due is the letter's due_at; nil for none.
	due    *time.Time
	status deadletter.Status // set after capture; empty stays dead
}

// seedSpecs captures the letters of specs, then moves the ones whose spec
// says so to their status, as a replay or a discard would.
func seedSpecs(t *testing.T, pool *pgxpool.Pool, specs ...letterSpec) {
	t.Helper()
	letters := make([]deadletter.Letter, len(specs))
	for i, s := range specs {
		l := seedLetter(i, s.category, "q.dlq")
		l.Fingerprint = sha256.Sum256(fmt.Appendf(nil, "signals-%d", i))
		l.JobKey = fmt.Sprintf("expire:r-%d:v3", i)
		l.ErrorClass, l.Attempts, l.DeadLetteredAt, l.DueAt = s.class, s.attempts, s.deadAt, s.due
		letters[i] = l
	}
	for start := 0; start < len(letters); start += 500 {
		seed(t, pool, letters[start:min(start+500, len(letters))]...)
	}
	for _, status := range []deadletter.Status{deadletter.StatusInRequest, deadletter.StatusReplayed, deadletter.StatusDiscarded} {
		var ids []string
		for i, s := range specs {
			if s.status == status {
				ids = append(ids, fmt.Sprintf("expire:r-%d:v3", i))
			}
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := pool.Exec(context.Background(), `UPDATE expiryctl.dead_letter_states SET status = $1 WHERE dead_letter_id IN (SELECT id FROM expiryctl.dead_letters WHERE job_key = ANY ($2))`,
			string(status), ids); err != nil {
			t.Fatal(err)
		}
	}
}

func ago(now time.Time, d time.Duration) time.Time { return now.Add(-d) }

func duePtr(t time.Time) *time.Time { return &t }

// bothWays reads the signals unbounded (from the tallies) and bounded by a
// window that holds every letter (from the letters): the two must agree.
func bothWays(t *testing.T, archive *deadletter.Archive, now time.Time) (tallied, counted deadletter.Signals) {
	t.Helper()
	ctx := context.Background()
	tallied, err := archive.Signals(ctx, deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counted, err = archive.Signals(ctx, deadletter.SignalsOptions{Since: now.Add(-400 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tallied, counted
}

func TestSignalsArrivalRatesAndTrends(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	te, val := deadletter.TransientExhausted, deadletter.Validation
	// Margins of a minute at least from every window's edge, so that the
	// seconds between seeding and reading cannot move a letter across one.
	var specs []letterSpec
	for _, d := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, // last 5 minutes
		20 * time.Minute, 30 * time.Minute, 40 * time.Minute, // last hour
		2 * time.Hour, 3 * time.Hour, 4 * time.Hour, 5 * time.Hour, 6 * time.Hour, 7 * time.Hour, // last 24 hours
		30 * time.Hour, 48 * time.Hour} { // older
		specs = append(specs, letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, d)})
	}
	specs = append(specs,
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: ago(now, 50*time.Minute), status: deadletter.StatusReplayed},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: ago(now, 10*time.Hour)})
	seedSpecs(t, db.Pool, specs...)
	archive := deadletter.NewArchive(db.Pool, "alice")

	tallied, counted := bothWays(t, archive, now)
	for name, s := range map[string]deadletter.Signals{"unbounded": tallied, "bounded": counted} {
		a := s.Arrivals
		if a.Last5m.Letters != 3 || a.Last1h.Letters != 7 || a.Last24h.Letters != 14 {
			t.Fatalf("%s: arrivals %d, %d, %d; want 3 in 5 min, 7 in the hour, 14 in 24 h (a replayed letter still arrived)",
				name, a.Last5m.Letters, a.Last1h.Letters, a.Last24h.Letters)
		}
		if a.Last5m.PerMinute != 0.6 || math.Abs(a.Last1h.PerMinute-7.0/60) > 1e-12 || math.Abs(a.Last24h.PerMinute-14.0/1440) > 1e-12 {
			t.Errorf("%s: rates %v, %v, %v per minute", name, a.Last5m.PerMinute, a.Last1h.PerMinute, a.Last24h.PerMinute)
		}
		// 0.6/min against 7/60: ×36/7; the hour against the day: ×12.
		if a.FiveMinutesVsHour.Direction != deadletter.Rising || math.Abs(*a.FiveMinutesVsHour.Ratio-36.0/7) > 1e-9 ||
			a.HourVsDay.Direction != deadletter.Rising || math.Abs(*a.HourVsDay.Ratio-12) > 1e-9 {
			t.Errorf("%s: trends %+v and %+v, want rising ×5.14 and rising ×12", name, a.FiveMinutesVsHour, a.HourVsDay)
		}
		if len(s.Categories) != 2 || s.Categories[0].Category != te || s.Categories[1].Category != val {
			t.Fatalf("%s: categories %+v", name, s.Categories)
		}
		ta, va := s.Categories[0].Arrivals, s.Categories[1].Arrivals
		if ta.Last5m.Letters != 3 || ta.Last1h.Letters != 6 || ta.Last24h.Letters != 12 ||
			va.Last5m.Letters != 0 || va.Last1h.Letters != 1 || va.Last24h.Letters != 2 {
			t.Errorf("%s: per category %+v / %+v", name, ta, va)
		}
		// Nothing in 5 minutes against one in the hour is falling, at ×0.
		if va.FiveMinutesVsHour.Direction != deadletter.Falling || *va.FiveMinutesVsHour.Ratio != 0 {
			t.Errorf("%s: validation's trend %+v, want falling ×0", name, va.FiveMinutesVsHour)
		}
	}

	// Until ends the windows: 90 minutes ago, the letters of the last hour
	// had not arrived yet; the one of 2 hours ago had, in its last hour.
	until := ago(now, 90*time.Minute)
	s, err := archive.Signals(context.Background(), deadletter.SignalsOptions{Until: until})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ArrivalsEnd.Equal(until) || s.Arrivals.Last5m.Letters != 0 || s.Arrivals.Last1h.Letters != 1 ||
		s.Arrivals.Last24h.Letters != 7 {
		t.Errorf("until 90 minutes ago: end %v, arrivals %+v; want 0, 1 and 7", s.ArrivalsEnd, s.Arrivals)
	}
	// An until later than now ends them now.
	s, err = archive.Signals(context.Background(), deadletter.SignalsOptions{Until: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ArrivalsEnd.Equal(s.At) || s.Arrivals.Last5m.Letters != 3 {
		t.Errorf("until in the future: end %v (at %v), %d in 5 minutes", s.ArrivalsEnd, s.At, s.Arrivals.Last5m.Letters)
	}

	// A quiet archive is steady, with no ratio to give.
	quiet := deadletter.NewArrivals(0, 0, 0)
	if quiet.FiveMinutesVsHour.Direction != deadletter.Steady || quiet.FiveMinutesVsHour.Ratio != nil {
		t.Errorf("no arrivals: %+v", quiet.FiveMinutesVsHour)
	}
	if tr := deadletter.NewTrend(1.2, 1); tr.Direction != deadletter.Steady {
		t.Errorf("×1.2 is %s, want steady", tr.Direction)
	}
}

// TestSignalsArrivalWindowsAcrossHourTallies ends the windows at half past
// an hour, so that the 24-hour window is a partial first hour read from the
// letters, 23 whole hours from the tallies and a partial last hour from
// the letters again; letters just inside and just outside each edge tell
// whether the pieces fit.
func TestSignalsArrivalWindowsAcrossHourTallies(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	end := now.Truncate(time.Hour).Add(-30 * time.Minute)
	at := func(d time.Duration) letterSpec {
		return letterSpec{category: deadletter.NotFound, class: "not_found", attempts: 1, deadAt: end.Add(-d)}
	}
	seedSpecs(t, db.Pool,
		at(24*time.Hour+time.Microsecond), // just before the window
		at(24*time.Hour),                  // its first instant
		at(23*time.Hour+50*time.Minute),   // partial first hour
		at(23*time.Hour+30*time.Minute),   // first whole hour
		at(5*time.Hour),                   // whole hours
		at(31*time.Minute),                // whole hours, outside the last 30 minutes' hour
		at(29*time.Minute),                // partial last hour
		at(5*time.Minute),                 // the 5 minutes' first instant
		at(time.Microsecond),              // the last instant
		at(0),                             // the end is not in the window
	)
	s, err := deadletter.NewArchive(db.Pool, "alice").Signals(context.Background(), deadletter.SignalsOptions{Until: end})
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Arrivals; a.Last5m.Letters != 2 || a.Last1h.Letters != 4 || a.Last24h.Letters != 8 {
		t.Errorf("windows ending %v: %d, %d, %d letters; want 2, 4 and 8", end, a.Last5m.Letters, a.Last1h.Letters, a.Last24h.Letters)
	}
}

func TestSignalsCountsByCategoryAndClassWithAttempts(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	at := ago(now, 3*time.Hour)
	te, val, exp := deadletter.TransientExhausted, deadletter.Validation, deadletter.BrokerExpired
	seedSpecs(t, db.Pool,
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: at},
		letterSpec{category: te, class: "db_timeout", attempts: 5, deadAt: at},
		letterSpec{category: te, class: "db_timeout", attempts: 5, deadAt: at},
		letterSpec{category: te, class: "db_timeout", attempts: 8, deadAt: at},
		letterSpec{category: te, class: "db_timeout", attempts: 20, deadAt: at, status: deadletter.StatusReplayed},
		letterSpec{category: te, class: "throttled", attempts: 2, deadAt: at, status: deadletter.StatusInRequest},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: at},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: at},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: at},
		letterSpec{category: val, class: "validation", attempts: 9, deadAt: at, status: deadletter.StatusDiscarded},
		letterSpec{category: exp, class: "", attempts: 0, deadAt: at},
		letterSpec{category: exp, class: "", attempts: 0, deadAt: ago(now, 30*24*time.Hour)},
	)
	archive := deadletter.NewArchive(db.Pool, "alice")
	tallied, counted := bothWays(t, archive, now)
	for name, s := range map[string]deadletter.Signals{"unbounded": tallied, "bounded": counted} {
		type line struct {
			name         string
			count, total int64
			spread       deadletter.AttemptSpread
		}
		var cats []line
		for _, c := range s.Categories {
			cats = append(cats, line{string(c.Category), c.Count, c.Total, *c.Attempts})
		}
		// transient-exhausted waits with 2, 3, 5, 5, 8 attempts: the median
		// is the third.
		wantCats := []line{{"transient-exhausted", 5, 6, deadletter.AttemptSpread{Min: 2, P50: 5, Max: 8}},
			{"validation", 3, 4, deadletter.AttemptSpread{Min: 1, P50: 1, Max: 1}},
			{"broker-expired", 2, 2, deadletter.AttemptSpread{}}}
		if !slices.Equal(cats, wantCats) {
			t.Errorf("%s: categories\n%+v\nwant\n%+v", name, cats, wantCats)
		}
		var classes []line
		for _, c := range s.ErrorClasses {
			classes = append(classes, line{c.ErrorClass, c.Count, c.Total, *c.Attempts})
		}
		wantClasses := []line{{"db_timeout", 4, 5, deadletter.AttemptSpread{Min: 3, P50: 5, Max: 8}},
			{"validation", 3, 4, deadletter.AttemptSpread{Min: 1, P50: 1, Max: 1}},
			{"", 2, 2, deadletter.AttemptSpread{}},
			{"throttled", 1, 1, deadletter.AttemptSpread{Min: 2, P50: 2, Max: 2}}}
		if !slices.Equal(classes, wantClasses) {
			t.Errorf("%s: error classes\n%+v\nwant\n%+v", name, classes, wantClasses)
		}
		wantStatuses := map[deadletter.Category]map[deadletter.Status]int64{
			te:  {deadletter.StatusDead: 4, deadletter.StatusInRequest: 1, deadletter.StatusReplayed: 1, deadletter.StatusDiscarded: 0},
			val: {deadletter.StatusDead: 3, deadletter.StatusInRequest: 0, deadletter.StatusReplayed: 0, deadletter.StatusDiscarded: 1},
			exp: {deadletter.StatusDead: 2, deadletter.StatusInRequest: 0, deadletter.StatusReplayed: 0, deadletter.StatusDiscarded: 0},
		}
		for _, c := range s.Categories {
			if !maps.Equal(c.ByStatus, wantStatuses[c.Category]) {
				t.Errorf("%s: %s by status %v, want %v", name, c.Category, c.ByStatus, wantStatuses[c.Category])
			}
		}
		if te := s.Categories[0]; len(te.Queues) != 1 || te.OldestDeadLetteredAt == nil || !te.OldestDeadLetteredAt.Equal(at) {
			t.Errorf("%s: transient-exhausted queues %v, oldest %v", name, te.Queues, te.OldestDeadLetteredAt)
		}
	}

	// A window counts only its letters: the broker-expired letter of a
	// month ago is outside the last week.
	s, err := archive.Signals(context.Background(), deadletter.SignalsOptions{Since: ago(now, 7*24*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if be := s.Categories[2]; be.Category != exp || be.Count != 1 || be.Total != 1 {
		t.Errorf("last week's broker-expired: %+v, want 1 of 1", be)
	}

	// The tallies follow a status change made by any client.
	if _, err := db.Pool.Exec(context.Background(),
		`UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE error_class = 'db_timeout' AND attempts = 8`); err != nil {
		t.Fatal(err)
	}
	s, err = archive.Signals(context.Background(), deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.ErrorClasses[0]; c.ErrorClass != "db_timeout" || c.Count != 3 || c.Total != 5 || c.Attempts.Max != 5 {
		t.Errorf("after a replay: %+v (attempts %+v), want 3 of 5 waiting, at most 5 attempts", c, *c.Attempts)
	}
}

func TestSignalsOverdueHoldsAndLateness(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	te := deadletter.TransientExhausted
	var specs []letterSpec
	// 200 overdue holds, 7, 14, … 1400 minutes late: over 23 hours of
	// due times, some in the current hour.
	for i := 1; i <= 200; i++ {
		specs = append(specs, letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Duration(i)*time.Minute),
			due: duePtr(ago(now, time.Duration(7*i)*time.Minute))})
	}
	// Not overdue: due in the future, without a due_at, or decided.
	specs = append(specs,
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Minute), due: duePtr(now.Add(time.Hour))},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Minute)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Minute), due: duePtr(ago(now, 5000*time.Hour)),
			status: deadletter.StatusReplayed},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Minute), due: duePtr(ago(now, 6000*time.Hour)),
			status: deadletter.StatusDiscarded})
	// In a request is not decided yet: it is overdue, and the latest of all.
	specs = append(specs, letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, time.Minute),
		due: duePtr(ago(now, 2000*time.Minute)), status: deadletter.StatusInRequest})
	seedSpecs(t, db.Pool, specs...)
	archive := deadletter.NewArchive(db.Pool, "alice")

	// 201 holds, least late first: rank ceil(0.5·201) = 101 is 707
	// minutes late, rank ceil(0.99·201) = 199 is 1393, the last 2000.
	tallied, counted := bothWays(t, archive, now)
	for name, s := range map[string]deadletter.Signals{"unbounded": tallied, "bounded": counted} {
		o := s.Overdue
		if o.Count != 201 || o.LatenessP50 == nil || o.LatenessP99 == nil || o.LatenessMax == nil {
			t.Fatalf("%s: overdue %+v, want 201 with lateness", name, o)
		}
		// Lateness is by the database's clock at the snapshot: s.At.
		late := func(minutes int) time.Duration { return s.At.Sub(ago(now, time.Duration(minutes)*time.Minute)) }
		if o.LatenessP50.Duration() != late(707) || o.LatenessP99.Duration() != late(1393) || o.LatenessMax.Duration() != late(2000) {
			t.Errorf("%s: lateness p50 %v, p99 %v, max %v; want %v, %v, %v", name, o.LatenessP50.Duration(), o.LatenessP99.Duration(),
				o.LatenessMax.Duration(), late(707), late(1393), late(2000))
		}
		if !o.OldestDueAt.Equal(ago(now, 2000*time.Minute)) {
			t.Errorf("%s: oldest due %v", name, o.OldestDueAt)
		}
	}

	// Replaying the latest and the 100 more than 703 minutes late takes them
	// out (703: the seconds since seeding cannot carry the 700 across).
	if _, err := db.Pool.Exec(context.Background(), `UPDATE expiryctl.dead_letter_states SET status = 'replayed'
		WHERE status = 'in_request' OR (due_at < now() - interval '703 minutes' AND status = 'dead')`); err != nil {
		t.Fatal(err)
	}
	s, err := archive.Signals(context.Background(), deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Left: 7 … 700 minutes late, 100 holds: rank 50 is 350, rank 99 is 693.
	if o := s.Overdue; o.Count != 100 || o.LatenessP50.Duration() != s.At.Sub(ago(now, 350*time.Minute)) ||
		o.LatenessP99.Duration() != s.At.Sub(ago(now, 693*time.Minute)) || o.LatenessMax.Duration() != s.At.Sub(ago(now, 700*time.Minute)) {
		t.Errorf("after the replay: %+v", o)
	}
	// None overdue: nulls, not zeros.
	if _, err := db.Pool.Exec(context.Background(), `UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE status = 'dead'`); err != nil {
		t.Fatal(err)
	}
	s, err = archive.Signals(context.Background(), deadletter.SignalsOptions{})
	if err != nil || s.Overdue.Count != 0 || s.Overdue.LatenessP50 != nil || s.Overdue.OldestDueAt != nil {
		t.Errorf("nothing overdue: %+v, %v", s.Overdue, err)
	}
}

// nearestRank sorts dues least late first and returns the deadline at
// each nearest-rank percentile, as percentile_disc finds it.
func nearestRank(dues []time.Time) func(p float64) time.Time {
	slices.SortFunc(dues, func(x, y time.Time) int { return y.Compare(x) })
	return func(p float64) time.Time { return dues[int(math.Ceil(p*float64(len(dues))))-1] }
}

// TestSignalsLatenessMatchesNearestRank cross-checks the tallies' way of
// finding percentiles against a plain sort, on holds spread unevenly over
// four days with many in a few hours and ties.
func TestSignalsLatenessMatchesNearestRank(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	rng := rand.New(rand.NewPCG(13, 13))
	var specs []letterSpec
	var dues []time.Time
	for range 1337 {
		late := time.Duration(rng.IntN(4*24*3600)) * time.Second
		if rng.IntN(3) == 0 {
			late = time.Duration(rng.IntN(3)) * time.Hour // ties, and crowded hours
		}
		due := ago(now, late+time.Second)
		specs = append(specs, letterSpec{category: deadletter.TransientExhausted, class: "db_timeout", attempts: 1 + rng.IntN(4),
			deadAt: ago(now, time.Duration(rng.IntN(3600))*time.Second), due: &due})
		dues = append(dues, due)
	}
	seedSpecs(t, db.Pool, specs...)
	rank := nearestRank(dues)

	tallied, counted := bothWays(t, deadletter.NewArchive(db.Pool, "alice"), now)
	for name, s := range map[string]deadletter.Signals{"unbounded": tallied, "bounded": counted} {
		o := s.Overdue
		if o.Count != int64(len(dues)) || o.LatenessP50.Duration() != s.At.Sub(rank(0.5)) ||
			o.LatenessP99.Duration() != s.At.Sub(rank(0.99)) || o.LatenessMax.Duration() != s.At.Sub(dues[len(dues)-1]) {
			t.Errorf("%s: %d overdue, p50 %v, p99 %v, max %v; want %d, %v, %v, %v", name, o.Count, o.LatenessP50.Duration(),
				o.LatenessP99.Duration(), o.LatenessMax.Duration(), len(dues), s.At.Sub(rank(0.5)), s.At.Sub(rank(0.99)),
				s.At.Sub(dues[len(dues)-1]))
		}
	}
}

// TestSignalsOverdueSplitsPermanentApart: letters that failed for good
// (conflict, not-found), later than any other, are overdue in their
// categories' lines and in Permanent, never in the count that pages nor
// in its lateness; the current hour's letters count too. Tallies and a
// bounded count agree.
func TestSignalsOverdueSplitsPermanentApart(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	var specs []letterSpec
	var dues []time.Time
	add := func(c deadletter.Category, class string, late time.Duration) time.Time {
		due := ago(now, late)
		specs = append(specs, letterSpec{category: c, class: class, attempts: 3, deadAt: ago(now, time.Minute), due: &due})
		return due
	}
	for i := range 30 {
		dues = append(dues, add(deadletter.TransientExhausted, "db_timeout", time.Duration(2+i*7)*time.Minute))
	}
	var oldestConflict, oldestNotFound time.Time
	for i := range 20 {
		oldestConflict = add(deadletter.Conflict, "version_conflict", time.Duration(10+i)*time.Hour)
	}
	for i := range 5 {
		oldestNotFound = add(deadletter.NotFound, "not_found", time.Duration(3+i)*time.Hour)
	}
	seedSpecs(t, db.Pool, specs...)
	rank := nearestRank(dues)

	tallied, counted := bothWays(t, deadletter.NewArchive(db.Pool, "alice"), now)
	for name, s := range map[string]deadletter.Signals{"unbounded": tallied, "bounded": counted} {
		o := s.Overdue
		if o.Count != 30 || o.Permanent != 25 {
			t.Errorf("%s: %d overdue and %d failed for good, want 30 and 25", name, o.Count, o.Permanent)
		}
		if o.OldestDueAt == nil || !o.OldestDueAt.Equal(dues[len(dues)-1]) || o.LatenessMax.Duration() != s.At.Sub(dues[len(dues)-1]) ||
			o.LatenessP50.Duration() != s.At.Sub(rank(0.5)) || o.LatenessP99.Duration() != s.At.Sub(rank(0.99)) {
			t.Errorf("%s: oldest %v, p50 %v, p99 %v, max %v: want the transient letters' alone (%v, %v, %v)", name, o.OldestDueAt,
				o.LatenessP50.Duration(), o.LatenessP99.Duration(), o.LatenessMax.Duration(),
				dues[len(dues)-1], s.At.Sub(rank(0.5)), s.At.Sub(rank(0.99)))
		}
		type line struct {
			category  deadletter.Category
			permanent bool
			count     int64
			oldest    time.Time
		}
		var got []line
		for _, c := range o.ByCategory {
			got = append(got, line{c.Category, c.Permanent, c.Count, *c.OldestDueAt})
		}
		want := []line{
			{deadletter.TransientExhausted, false, 30, dues[len(dues)-1]},
			{deadletter.NotFound, true, 5, oldestNotFound},
			{deadletter.Conflict, true, 20, oldestConflict},
		}
		if !slices.EqualFunc(got, want, func(x, y line) bool {
			return x.category == y.category && x.permanent == y.permanent && x.count == y.count && x.oldest.Equal(y.oldest)
		}) {
			t.Errorf("%s: overdue by category\n %+v\nwant\n %+v", name, got, want)
		}
	}
}

func TestSignalsAreAuditedAndRefuseAnEmptyWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	now := dbNow(t, db.Pool)
	seedSpecs(t, db.Pool, letterSpec{category: deadletter.TransientExhausted, class: "db_timeout", attempts: 1, deadAt: ago(now, time.Minute),
		due: duePtr(ago(now, time.Hour))})
	archive := deadletter.NewArchive(db.Pool, "carol")
	if _, err := archive.Signals(ctx, deadletter.SignalsOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.Signals(ctx, deadletter.SignalsOptions{Since: now, Until: ago(now, time.Hour)}); err == nil {
		t.Fatal("a window that ends before it starts was read")
	}
	if _, err := archive.WithoutListingAudit().Signals(ctx, deadletter.SignalsOptions{}); err != nil {
		t.Fatal(err)
	}
	var ok, failed, overdue int
	err := db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'ok'), count(*) FILTER (WHERE outcome = 'error'),
		max((details->>'overdue')::int) FROM expiryctl.audit_log WHERE action = 'dlq.summary' AND actor = 'carol'`).Scan(&ok, &failed, &overdue)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || failed != 1 || overdue != 1 {
		t.Errorf("audit rows: %d ok, %d failed, overdue %d; want one of each (a quiet archive writes none) and 1 overdue", ok, failed, overdue)
	}
}

// TestSignalTalliesMatchTheLetters holds the triggers to their job: after
// captures, status changes and a redaction, the tallies are what counting
// the letters gives.
func TestSignalTalliesMatchTheLetters(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	now := dbNow(t, db.Pool)
	var specs []letterSpec
	statuses := []deadletter.Status{"", deadletter.StatusInRequest, deadletter.StatusReplayed, deadletter.StatusDiscarded}
	for i := range 300 {
		due := ago(now, time.Duration(i*37)*time.Minute)
		s := letterSpec{category: deadletter.Categories()[i%8], class: []string{"", "db_timeout", "throttled"}[i%3], attempts: i % 5,
			deadAt: ago(now, time.Duration(i)*time.Hour), due: &due, status: statuses[i%4]}
		if i%7 == 0 {
			s.due = nil
		}
		specs = append(specs, s)
	}
	seedSpecs(t, db.Pool, specs...)
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letter_states SET status = 'dead' WHERE status = 'in_request' AND attempts = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE expiryctl.dead_letters SET payload = '', headers = '{}', redacted_at = now()
		WHERE dead_lettered_at < now() - interval '200 hours'`); err != nil {
		t.Fatal(err)
	}
	var classDiff, dueDiff, arrivalDiff int
	err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (
			SELECT reason_category, error_class, status, attempts, letters FROM expiryctl.dead_letter_class_tallies WHERE letters <> 0
			EXCEPT SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*) FROM `+lettersAndStates+` GROUP BY 1, 2, 3, 4) d)
		+ (SELECT count(*) FROM (
			SELECT reason_category, coalesce(error_class, ''), status, attempts, count(*) FROM `+lettersAndStates+` GROUP BY 1, 2, 3, 4
			EXCEPT SELECT reason_category, error_class, status, attempts, letters FROM expiryctl.dead_letter_class_tallies) d),
		(SELECT count(*) FROM (
			SELECT due_hour, reason_category, letters FROM expiryctl.dead_letter_due_tallies WHERE letters <> 0
			EXCEPT SELECT date_trunc('hour', due_at, 'UTC'), reason_category, count(*) FROM `+lettersAndStates+`
			        WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL GROUP BY 1, 2) d)
		+ (SELECT count(*) FROM (
			SELECT date_trunc('hour', due_at, 'UTC'), reason_category, count(*) FROM `+lettersAndStates+`
			 WHERE status IN ('dead', 'in_request') AND due_at IS NOT NULL GROUP BY 1, 2
			EXCEPT SELECT due_hour, reason_category, letters FROM expiryctl.dead_letter_due_tallies) d),
		(SELECT count(*) FROM (
			SELECT dead_hour, reason_category, letters FROM expiryctl.dead_letter_arrival_tallies WHERE letters <> 0
			EXCEPT SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, count(*) FROM `+lettersAndStates+` GROUP BY 1, 2) d)
		+ (SELECT count(*) FROM (
			SELECT date_trunc('hour', dead_lettered_at, 'UTC'), reason_category, count(*) FROM `+lettersAndStates+` GROUP BY 1, 2
			EXCEPT SELECT dead_hour, reason_category, letters FROM expiryctl.dead_letter_arrival_tallies) d)`).Scan(&classDiff, &dueDiff, &arrivalDiff)
	if err != nil {
		t.Fatal(err)
	}
	if classDiff != 0 || dueDiff != 0 || arrivalDiff != 0 {
		t.Errorf("the tallies differ from the letters: %d class rows, %d due-hour rows, %d arrival-hour rows", classDiff, dueDiff, arrivalDiff)
	}
}

// lettersAndStates is each letter with its status, under one name, for
// recounting the tallies from the letters.
const lettersAndStates = `(SELECT l.*, s.status FROM expiryctl.dead_letters l
	JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = l.id) AS letters`

// TestPermanentCategoriesAreTheSchemas: the Go list that sets overdue
// letters apart and the schema's, which refuses a request holding them,
// name the same categories.
func TestPermanentCategoriesAreTheSchemas(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var schema []string
	if err := db.Pool.QueryRow(context.Background(), `SELECT expiryctl.permanent_categories()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	got := deadletter.PermanentCategoryNames()
	slices.Sort(schema)
	slices.Sort(got)
	if !slices.Equal(got, schema) {
		t.Errorf("deadletter.PermanentCategories %v, the schema's permanent_categories() %v", got, schema)
	}
	for _, c := range deadletter.Categories() {
		if c.Permanent() != slices.Contains(schema, string(c)) {
			t.Errorf("%s.Permanent() = %v, the schema says otherwise", c, c.Permanent())
		}
	}
}
