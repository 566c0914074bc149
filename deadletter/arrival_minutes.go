package deadletter

import (
	"context"
	"time"

	"github.com/expiryctl/expiryctl/audit"
)

// ArrivalMinuteBuckets is how many one-minute buckets ArrivalMinutes
// returns: the last hour.
const ArrivalMinuteBuckets = 60

// MinuteArrivals are the letters dead-lettered in each minute of the hour
// before End, per category: what a sparkline of the last hour draws.
type MinuteArrivals struct {
	// End is the database's clock when they were read; bucket i of every
	// category covers [End − (60−i) min, End − (59−i) min), so the last
	// bucket is the latest minute and the last five are Signals' 5 minutes.
	End time.Time
	// Categories are the categories with arrivals in the hour, in the
	// order of Categories.
	Categories []CategoryMinutes
}

// CategoryMinutes is one category's arrivals per minute, oldest minute
// first.
type CategoryMinutes struct {
	Category Category
	Letters  [ArrivalMinuteBuckets]int64
}

// minuteTally is one category's letters in one minute: Ago whole minutes
// before the end (0 is the latest).
type minuteTally struct {
	Category Category
	Ago      int
	Letters  int64
}

// ArrivalMinutes reads the arrivals of the last hour per category and
// minute, by the database's clock, and records dlq.summary (unless the
// archive is quiet, as the terminal UI's is). It reads an hour of the
// dead_lettered_at indexes, whatever the archive's size.
func (a *Archive) ArrivalMinutes(ctx context.Context) (MinuteArrivals, error) {
	details := map[string]any{"arrivals_by_minute": ArrivalMinuteBuckets}
	end, err := a.letters.LetterClock(ctx)
	if err != nil {
		return MinuteArrivals{}, a.fail(ctx, "dlq.summary", "", details, err)
	}
	tallies, err := a.letters.LetterArrivalMinutes(ctx, end)
	if err != nil {
		return MinuteArrivals{}, a.fail(ctx, "dlq.summary", "", details, err)
	}
	m := assembleMinutes(end, tallies)
	var letters int64
	for _, c := range m.Categories {
		for _, n := range c.Letters {
			letters += n
		}
	}
	details["arrivals_1h"] = letters
	return m, a.record(ctx, audit.Entry{Actor: a.actor, Action: "dlq.summary", Details: details})
}

// assembleMinutes puts the tallies into buckets, oldest minute first.
func assembleMinutes(end time.Time, tallies []minuteTally) MinuteArrivals {
	byCategory := map[Category]*CategoryMinutes{}
	for _, t := range tallies {
		if t.Ago < 0 || t.Ago >= ArrivalMinuteBuckets {
			continue
		}
		c := byCategory[t.Category]
		if c == nil {
			c = &CategoryMinutes{Category: t.Category}
			byCategory[t.Category] = c
		}
		c.Letters[ArrivalMinuteBuckets-1-t.Ago] += t.Letters
	}
	m := MinuteArrivals{End: end, Categories: []CategoryMinutes{}}
	for _, c := range Categories() {
		if byCategory[c] != nil {
			m.Categories = append(m.Categories, *byCategory[c])
		}
	}
	return m
}
