package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func TestArrivalMinutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := dbNow(t, db.Pool)
	te, val := deadletter.TransientExhausted, deadletter.Validation
	// Half a minute into each minute, so that the seconds between seeding
	// and reading cannot move a letter into the next bucket.
	minute := func(k int) time.Time { return ago(now, time.Duration(k)*time.Minute+30*time.Second) }
	seedSpecs(t, db.Pool,
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: minute(0)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: minute(0)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: minute(1)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: minute(59)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: minute(61)},
		letterSpec{category: te, class: "db_timeout", attempts: 3, deadAt: ago(now, 3*time.Hour)},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: minute(10)},
		letterSpec{category: val, class: "validation", attempts: 1, deadAt: minute(20), status: deadletter.StatusReplayed},
	)
	archive := deadletter.NewArchive(db.Pool, "dave")
	m, err := archive.ArrivalMinutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.End.Sub(now); d < 0 || d > 25*time.Second {
		t.Errorf("end %s is %s after the seeding clock, want the database's now()", m.End, d)
	}
	want := map[deadletter.Category]map[int]int64{
		te:  {59: 2, 58: 1, 0: 1},
		val: {49: 1, 39: 1}, // a replayed letter still arrived
	}
	if len(m.Categories) != 2 || m.Categories[0].Category != te || m.Categories[1].Category != val {
		t.Fatalf("categories %+v, want transient-exhausted then validation", m.Categories)
	}
	for _, c := range m.Categories {
		for i, n := range c.Letters {
			if n != want[c.Category][i] {
				t.Errorf("%s bucket %d: %d letters, want %d", c.Category, i, n, want[c.Category][i])
			}
		}
	}

	// The last five buckets are the signals' 5 minutes.
	s, err := archive.Signals(ctx, deadletter.SignalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last5 int64
	for _, c := range m.Categories {
		for _, n := range c.Letters[deadletter.ArrivalMinuteBuckets-5:] {
			last5 += n
		}
	}
	if last5 != s.Arrivals.Last5m.Letters {
		t.Errorf("last five minutes: %d by minute, %d by Signals", last5, s.Arrivals.Last5m.Letters)
	}

	// A quiet archive, the terminal UI's, writes no audit row.
	if _, err := archive.WithoutListingAudit().ArrivalMinutes(ctx); err != nil {
		t.Fatal(err)
	}
	var rows int
	err = db.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log
		WHERE action = 'dlq.summary' AND actor = 'dave' AND details ? 'arrivals_by_minute'`).Scan(&rows)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d audit rows of the arrivals by minute, want 1 (the quiet read writes none)", rows)
	}
}

func TestArrivalMinutesEmpty(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	m, err := deadletter.NewArchive(db.Pool, "dave").WithoutListingAudit().ArrivalMinutes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.Categories == nil || len(m.Categories) != 0 {
		t.Errorf("an empty archive's arrivals: %+v, want no categories (and not null)", m.Categories)
	}
}
