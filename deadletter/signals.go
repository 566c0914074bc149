package deadletter

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/expiryctl/expiryctl/audit"
)

// SignalsOptions bounds what Signals counts. The zero value counts the
// whole archive, from tallies kept by the database, at a cost that does
// not grow with the archive; a bound reads the letters of its window
// instead, so its cost grows with the window.
type SignalsOptions struct {
	// Since and Until, when set, restrict the counts per category and per
	// error class, their attempts and the overdue holds to letters
	// dead-lettered at or after Since and before Until.
	Since, Until time.Time
}

// The arrival windows, each ending at Signals.ArrivalsEnd.
const (
	shortWindow = 5 * time.Minute
	hourWindow  = time.Hour
	dayWindow   = 24 * time.Hour
)

// A rate this many times the longer window's (or more) is rising; this
// many times smaller (or less) is falling.
const trendFactor = 1.5

// Signals is what on-call asks of the archive during an incident: are
// letters arriving faster than before, how many holds are past their
// deadline and by how much, and which categories and error classes hold
// the backlog, after how many attempts. All of it is read in one snapshot
// of the database and timed by the database's clock.
type Signals struct {
	// At is the database's clock when the snapshot was taken; overdue
	// lateness is measured from it.
	At time.Time `json:"at"`
	// Since and Until are the bounds asked for, null when unbounded.
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// ArrivalsEnd is where every arrival window ends: Until when it is set
	// and not after At, else At. Since does not shorten the windows: a rate
	// over a clipped window would read as a drop.
	ArrivalsEnd time.Time `json:"arrivals_end"`
	// Arrivals are the letters of every category dead-lettered in the
	// windows before ArrivalsEnd, by dead_lettered_at.
	Arrivals Arrivals `json:"arrivals"`
	// Overdue are the holds past their deadline and not yet decided.
	Overdue Overdue `json:"overdue"`
	// Categories are the categories that hold letters within the bounds or
	// had arrivals in the last 24 hours, in the order of Categories.
	Categories []CategorySignals `json:"categories"`
	// ErrorClasses are the error classes within the bounds, the most
	// waiting letters first.
	ErrorClasses []ErrorClassSignals `json:"error_classes"`
	// Redead are the letters that died again after a replay, per request,
	// within the bounds (see RequestRedead).
	Redead []RequestRedead `json:"redead_by_request"`
}

// Arrivals are dead-letter arrival rates over three windows ending at the
// same time, and how they compare.
type Arrivals struct {
	Last5m  ArrivalWindow `json:"last_5m"`
	Last1h  ArrivalWindow `json:"last_1h"`
	Last24h ArrivalWindow `json:"last_24h"`
	// FiveMinutesVsHour compares the last 5 minutes' rate with the last
	// hour's: is it getting worse now?
	FiveMinutesVsHour Trend `json:"trend_5m_vs_1h"`
	// HourVsDay compares the last hour's rate with the last 24 hours': is
	// this hour unusual?
	HourVsDay Trend `json:"trend_1h_vs_24h"`
}

// ArrivalWindow is the letters dead-lettered in one window.
type ArrivalWindow struct {
	WindowSeconds int64   `json:"window_seconds"`
	Letters       int64   `json:"letters"`
	PerMinute     float64 `json:"per_minute"`
}

// TrendDirection says which way a rate moves.
type TrendDirection string

// The directions of a Trend.
const (
	Rising  TrendDirection = "rising"
	Steady  TrendDirection = "steady"
	Falling TrendDirection = "falling"
)

// Trend compares a shorter window's rate with a longer one's that contains
// it. A ratio of 1.5 or more is rising, of 1/1.5 or less falling.
type Trend struct {
	Direction TrendDirection `json:"direction"`
	// Ratio is the shorter window's rate over the longer one's; null when
	// the longer window had no letters (then neither had: they nest).
	Ratio *float64 `json:"ratio"`
}

// Overdue are the waiting letters (dead or in a request, so neither
// replayed nor discarded) whose due_at has passed, by the database's clock.
// Letters without a due_at are not counted: nothing says when they were due.
// Count and its lateness are the letters a retry can fix, the figure that
// pages; those of the permanent categories (PermanentCategories), whose
// holds moved on or whose jobs are wrong, are counted apart in Permanent.
type Overdue struct {
	Count int64 `json:"count"`
	// OldestDueAt is the earliest deadline among them.
	OldestDueAt *time.Time `json:"oldest_due_at"`
	// The lateness (At − due_at) percentiles, nearest rank: P50 is the
	// lateness that half of the overdue holds reach or stay under. Null
	// when nothing is overdue.
	LatenessP50 *Seconds `json:"lateness_p50_seconds"`
	LatenessP99 *Seconds `json:"lateness_p99_seconds"`
	LatenessMax *Seconds `json:"lateness_max_seconds"`
	// Permanent counts the overdue letters of the permanent categories.
	Permanent int64 `json:"permanent"`
	// ByCategory is each category with overdue letters, in the order of
	// Categories.
	ByCategory []OverdueCategory `json:"by_category"`
}

// StillHeld counts the overdue letters whose holds may still be held in
// the reservation database, whatever their category but those whose hold
// moved on (Category.HoldMovedOn): the letters that speak for holds past
// their deadline there.
func (o Overdue) StillHeld() int64 {
	var n int64
	for _, c := range o.ByCategory {
		if !c.Category.HoldMovedOn() {
			n += c.Count
		}
	}
	return n
}

// OverdueCategory is one category's overdue letters.
type OverdueCategory struct {
	Category Category `json:"category"`
	// Permanent says no retry fixes a letter of the category: it is not
	// in Overdue.Count, and pages nobody.
	Permanent   bool       `json:"permanent"`
	Count       int64      `json:"count"`
	OldestDueAt *time.Time `json:"oldest_due_at"`
	LatenessMax *Seconds   `json:"lateness_max_seconds"`
}

// NewOverdue puts together the overdue letters of each category, and the
// lateness percentiles of those a retry can fix (their deadlines at the
// ranks, from the database), as lateness at the clock's time at.
func NewOverdue(at time.Time, categories []OverdueCategory, p50, p99 *time.Time) Overdue {
	out := Overdue{ByCategory: []OverdueCategory{}, LatenessP50: lateAt(at, p50), LatenessP99: lateAt(at, p99)}
	for _, want := range Categories() {
		for _, c := range categories {
			if c.Category != want || c.Count == 0 {
				continue
			}
			c.Permanent = c.Category.Permanent()
			if c.OldestDueAt != nil {
				utc := c.OldestDueAt.UTC()
				c.OldestDueAt = &utc
			}
			c.LatenessMax = lateAt(at, c.OldestDueAt)
			out.ByCategory = append(out.ByCategory, c)
			if c.Permanent {
				out.Permanent += c.Count
				continue
			}
			out.Count += c.Count
			if c.OldestDueAt != nil && (out.OldestDueAt == nil || c.OldestDueAt.Before(*out.OldestDueAt)) {
				out.OldestDueAt = c.OldestDueAt
			}
		}
	}
	out.LatenessMax = lateAt(at, out.OldestDueAt)
	if out.Count == 0 {
		out.LatenessP50, out.LatenessP99 = nil, nil
	}
	return out
}

// lateAt is how late a deadline due is at the clock's time at; nil for no
// deadline.
func lateAt(at time.Time, due *time.Time) *Seconds {
	if due == nil {
		return nil
	}
	s := Seconds(at.Sub(*due))
	return &s
}

// CategorySignals is one category's line: the summary's counts, its
// arrivals and the attempts its waiting letters went through.
type CategorySignals struct {
	CategorySummary
	Arrivals Arrivals `json:"arrivals"`
	// Attempts spread over the waiting letters; null when none waits.
	Attempts *AttemptSpread `json:"attempts"`
	// ByStatus counts the category's letters in each status, every status
	// present: dead, in_request, replayed, discarded.
	ByStatus map[Status]int64 `json:"by_status"`
}

// emptyStatusCounts has a zero for every status, so that a reader (and a
// metric) sees "none discarded" rather than nothing.
func emptyStatusCounts() map[Status]int64 {
	counts := map[Status]int64{}
	for _, s := range Statuses() {
		counts[s] = 0
	}
	return counts
}

// ErrorClassSignals is one error class's line. A letter that named no
// class (the broker dead-lettered it, or it was malformed) counts under
// the empty class.
type ErrorClassSignals struct {
	ErrorClass string `json:"error_class"`
	// Categories are the categories its letters were classified into.
	Categories []Category `json:"reason_categories"`
	// Count is the letters still waiting (dead or in a request); Total
	// includes those replayed or discarded.
	Count int64 `json:"count"`
	Total int64 `json:"total"`
	// Attempts spread over the waiting letters; null when none waits.
	Attempts *AttemptSpread `json:"attempts"`
}

// AttemptSpread is the distribution of processing attempts (Letter.Attempts)
// over a set of letters: least, median (nearest rank) and most.
type AttemptSpread struct {
	Min int `json:"min"`
	P50 int `json:"p50"`
	Max int `json:"max"`
}

// Seconds is a duration that JSON carries as a number of seconds, which is
// what `-o json` and the metrics give for every duration.
type Seconds time.Duration

// Duration returns s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) }

// MarshalJSON writes s as seconds, to the microsecond.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, math.Round(time.Duration(s).Seconds()*1e6)/1e6, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number of seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return errors.New("a duration in seconds must be a number")
	}
	*s = Seconds(time.Duration(math.Round(f * float64(time.Second))))
	return nil
}

// Signals reads the incident signals in one snapshot, bounded by opts, and
// records dlq.summary. Unbounded, every signal comes from tallies and
// indexes: nothing reads the whole archive.
func (a *Archive) Signals(ctx context.Context, opts SignalsOptions) (Signals, error) {
	details := map[string]any{}
	if !opts.Since.IsZero() {
		details["since"] = opts.Since.UTC()
	}
	if !opts.Until.IsZero() {
		details["until"] = opts.Until.UTC()
	}
	if !opts.Since.IsZero() && !opts.Until.IsZero() && !opts.Since.Before(opts.Until) {
		return Signals{}, a.fail(ctx, "dlq.summary", "", details,
			errors.New("the summary's window is empty: --since must be before --until"))
	}
	var s Signals
	err := a.letters.LetterSnapshot(ctx, func(l letterStore) error {
		var err error
		s, err = readSignals(ctx, l, opts)
		return err
	})
	if err != nil {
		return Signals{}, a.fail(ctx, "dlq.summary", "", details, err)
	}
	var waiting int64
	for _, c := range s.Categories {
		waiting += c.Count
	}
	details["categories"] = len(s.Categories)
	details["waiting"] = waiting
	details["overdue"], details["overdue_permanent"] = s.Overdue.Count, s.Overdue.Permanent
	details["arrivals_1h"] = s.Arrivals.Last1h.Letters
	return s, a.record(ctx, audit.Entry{Actor: a.actor, Action: "dlq.summary", Details: details})
}

// readSignals reads every signal through l, which reads one snapshot.
func readSignals(ctx context.Context, l letterStore, opts SignalsOptions) (Signals, error) {
	at, err := l.LetterClock(ctx)
	if err != nil {
		return Signals{}, err
	}
	end := at
	if !opts.Until.IsZero() && opts.Until.Before(at) {
		end = opts.Until.UTC()
	}
	bounded := !opts.Since.IsZero() || !opts.Until.IsZero()
	var summary []CategorySummary
	if bounded {
		summary, err = l.LetterSummaryBetween(ctx, opts)
	} else {
		summary, err = l.LetterSummary(ctx)
	}
	if err != nil {
		return Signals{}, err
	}
	attempts, err := l.LetterAttempts(ctx, opts)
	if err != nil {
		return Signals{}, err
	}
	arrivals, err := l.LetterArrivals(ctx, end)
	if err != nil {
		return Signals{}, err
	}
	overdue, err := l.LetterOverdue(ctx, opts)
	if err != nil {
		return Signals{}, err
	}
	s := assembleSignals(summary, attempts, arrivals, NewOverdue(at, overdue.Categories, overdue.P50, overdue.P99))
	s.At, s.ArrivalsEnd = at, end
	if s.Redead, err = l.LetterRedeadByRequest(ctx, opts); err != nil {
		return Signals{}, err
	}
	if !opts.Since.IsZero() {
		since := opts.Since.UTC()
		s.Since = &since
	}
	if !opts.Until.IsZero() {
		until := opts.Until.UTC()
		s.Until = &until
	}
	return s, nil
}

// attemptTally is how many letters of a category, error class and status
// went through a number of attempts.
type attemptTally struct {
	Category   Category
	ErrorClass string
	Status     Status
	Attempts   int
	Letters    int64
}

// waiting says whether the tally's letters still wait for a decision.
func (t attemptTally) waiting() bool { return t.Status == StatusDead || t.Status == StatusInRequest }

// arrivalTally is one category's letters in each arrival window.
type arrivalTally struct {
	Category                Category
	Last5m, Last1h, Last24h int64
}

// overdueTally is what the database says of the overdue holds: each
// category's count and earliest deadline, and the deadlines at the
// lateness ranks of those a retry can fix.
type overdueTally struct {
	Categories []OverdueCategory
	P50, P99   *time.Time
}

// assembleSignals puts the tallies together: per category and per class
// counts, attempt spreads, arrival rates and trends.
func assembleSignals(summary []CategorySummary, attempts []attemptTally, arrivals []arrivalTally, overdue Overdue) Signals {
	byCategory := map[Category]*CategorySignals{}
	line := func(c Category) *CategorySignals {
		if byCategory[c] == nil {
			byCategory[c] = &CategorySignals{CategorySummary: CategorySummary{Category: c, Queues: []string{}, Systems: []System{}}}
		}
		return byCategory[c]
	}
	for _, s := range summary {
		line(s.Category).CategorySummary = s
	}
	var total [3]int64
	for _, a := range arrivals {
		line(a.Category).Arrivals = NewArrivals(a.Last5m, a.Last1h, a.Last24h)
		total[0] += a.Last5m
		total[1] += a.Last1h
		total[2] += a.Last24h
	}

	type classLine struct {
		ErrorClassSignals
		histogram map[int]int64
	}
	byClass := map[string]*classLine{}
	categoryAttempts := map[Category]map[int]int64{}
	for _, t := range attempts {
		c := byClass[t.ErrorClass]
		if c == nil {
			c = &classLine{ErrorClassSignals: ErrorClassSignals{ErrorClass: t.ErrorClass}, histogram: map[int]int64{}}
			byClass[t.ErrorClass] = c
		}
		if !slices.Contains(c.Categories, t.Category) {
			c.Categories = append(c.Categories, t.Category)
		}
		c.Total += t.Letters
		cl := line(t.Category)
		if cl.ByStatus == nil {
			cl.ByStatus = emptyStatusCounts()
		}
		cl.ByStatus[t.Status] += t.Letters
		if !t.waiting() {
			continue
		}
		c.Count += t.Letters
		c.histogram[t.Attempts] += t.Letters
		if categoryAttempts[t.Category] == nil {
			categoryAttempts[t.Category] = map[int]int64{}
		}
		categoryAttempts[t.Category][t.Attempts] += t.Letters
	}

	s := Signals{Arrivals: NewArrivals(total[0], total[1], total[2]), Overdue: overdue,
		Categories: []CategorySignals{}, ErrorClasses: []ErrorClassSignals{}}
	for _, c := range Categories() {
		l, ok := byCategory[c]
		if !ok || (l.Total == 0 && l.Arrivals.Last24h.Letters == 0) {
			continue
		}
		if l.Arrivals.Last5m.WindowSeconds == 0 {
			l.Arrivals = NewArrivals(0, 0, 0)
		}
		l.Attempts = NewAttemptSpread(categoryAttempts[c])
		if l.ByStatus == nil {
			l.ByStatus = emptyStatusCounts()
		}
		s.Categories = append(s.Categories, *l)
	}
	for _, c := range byClass {
		slices.SortFunc(c.Categories, func(x, y Category) int {
			return cmp.Compare(slices.Index(Categories(), x), slices.Index(Categories(), y))
		})
		c.Attempts = NewAttemptSpread(c.histogram)
		s.ErrorClasses = append(s.ErrorClasses, c.ErrorClassSignals)
	}
	slices.SortFunc(s.ErrorClasses, func(x, y ErrorClassSignals) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(y.Total, x.Total), cmp.Compare(x.ErrorClass, y.ErrorClass))
	})
	return s
}

// NewArrivals returns the rates and trends of the letters that arrived in
// the last 5 minutes, hour and 24 hours (each window contains the shorter
// ones).
func NewArrivals(last5m, last1h, last24h int64) Arrivals {
	window := func(d time.Duration, n int64) ArrivalWindow {
		return ArrivalWindow{WindowSeconds: int64(d / time.Second), Letters: n, PerMinute: float64(n) / d.Minutes()}
	}
	a := Arrivals{Last5m: window(shortWindow, last5m), Last1h: window(hourWindow, last1h), Last24h: window(dayWindow, last24h)}
	a.FiveMinutesVsHour = NewTrend(a.Last5m.PerMinute, a.Last1h.PerMinute)
	a.HourVsDay = NewTrend(a.Last1h.PerMinute, a.Last24h.PerMinute)
	return a
}

// NewTrend compares a shorter window's rate with a longer window's.
func NewTrend(short, long float64) Trend {
	if long == 0 {
		if short > 0 {
			return Trend{Direction: Rising}
		}
		return Trend{Direction: Steady}
	}
	ratio := short / long
	t := Trend{Direction: Steady, Ratio: &ratio}
	switch {
	case ratio >= trendFactor:
		t.Direction = Rising
	case ratio <= 1/trendFactor:
		t.Direction = Falling
	}
	return t
}

// NewAttemptSpread returns the spread of a histogram of attempt counts
// (attempts → letters), or nil when it holds no letters.
func NewAttemptSpread(histogram map[int]int64) *AttemptSpread {
	var n int64
	values := make([]int, 0, len(histogram))
	for v, letters := range histogram {
		if letters > 0 {
			values = append(values, v)
			n += letters
		}
	}
	if n == 0 {
		return nil
	}
	slices.Sort(values)
	spread := &AttemptSpread{Min: values[0], Max: values[len(values)-1]}
	// Nearest rank, as PostgreSQL's percentile_disc: the first value whose
	// cumulative share reaches one half.
	rank := int64(math.Ceil(0.5 * float64(n)))
	var seen int64
	for _, v := range values {
		if seen += histogram[v]; seen >= rank {
			spread.P50 = v
			break
		}
	}
	return spread
}
