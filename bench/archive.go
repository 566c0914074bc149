package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
)

// archives are the two seeded databases scenarios 2 to 4 read: a small one
// for the baselines and a large one for the subjects.
type archives struct {
	small, large *benchDB
}

// seedArchives creates the small and the large archive and seeds them
// with cfg.SmallN and cfg.LargeN letters over span. The archives made so
// far are returned with an error too, for drop.
func seedArchives(ctx context.Context, cfg *config, span time.Duration) (archives, error) {
	end := time.Now().UTC().Truncate(time.Second)
	var a archives
	var err error
	if a.small, err = createDB(ctx, cfg.AdminURL, "small"); err != nil {
		return a, err
	}
	if a.large, err = createDB(ctx, cfg.AdminURL, "large"); err != nil {
		return a, err
	}
	for _, s := range []struct {
		db *benchDB
		n  int
	}{{a.small, cfg.SmallN}, {a.large, cfg.LargeN}} {
		cfg.logf("archive: seeding %d letters into %s", s.n, s.db.Name)
		took, err := seedArchive(ctx, s.db, s.n, end, span)
		if err != nil {
			return a, err
		}
		cfg.logf("archive: seeded %d letters (insert, indexes, vacuum analyze) in %s", s.n, took.Round(time.Millisecond))
	}
	return a, nil
}

// drop drops the archives that were made.
func (a archives) drop(cfg *config) {
	for _, db := range []*benchDB{a.small, a.large} {
		if db != nil {
			cfg.dropDB(db)
		}
	}
}

// benchArchives seeds the archives once and runs the list, summary and
// export scenarios on them. A scenario that fails is reported and the next
// one still runs.
func benchArchives(ctx context.Context, cfg *config, rep *report) error {
	a, err := seedArchives(ctx, cfg, seedSpan)
	defer a.drop(cfg)
	if err != nil {
		return err
	}

	for _, s := range []struct {
		name string
		fn   func(context.Context, *config, *report, archives) error
	}{{"list", benchList}, {"summary", benchSummary}, {"summary", benchMetrics}, {"export", benchExport}, {"tui", benchTUIOnArchive}} {
		if !cfg.selected(s.name) {
			continue
		}
		if err := s.fn(ctx, cfg, rep, a); err != nil {
			if ctx.Err() != nil {
				return err
			}
			rep.failed(s.name, err)
		}
	}
	return nil
}

// cursorAt returns the position of the row at offset in the listing's
// newest-first order, restricted to category when one is given.
func cursorAt(ctx context.Context, pool *pgxpool.Pool, category deadletter.Category, offset int) (*deadletter.Cursor, error) {
	var c deadletter.Cursor
	err := pool.QueryRow(ctx, `SELECT dead_lettered_at, id FROM expiryctl.dead_letters
		WHERE $1 = '' OR reason_category = $1
		ORDER BY dead_lettered_at DESC, id DESC OFFSET $2 LIMIT 1`, string(category), offset).Scan(&c.DeadLetteredAt, &c.ID)
	if err != nil {
		return nil, fmt.Errorf("cursor at offset %d: %w", offset, err)
	}
	return &c, nil
}

func categoryCount(ctx context.Context, pool *pgxpool.Pool, c deadletter.Category) (int, error) {
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM expiryctl.dead_letters WHERE reason_category = $1", string(c)).Scan(&n)
	return n, err
}

// listProbe times Archive.List, audit row included, and checks it returned
// a full page.
func listProbe(name string, arc *deadletter.Archive, f deadletter.Filter, after *deadletter.Cursor) *probe {
	return &probe{name: name, fn: func(ctx context.Context) error {
		page, err := arc.List(ctx, f, after, 50)
		if err != nil {
			return err
		}
		if len(page.Rows) != 50 {
			return fmt.Errorf("got %d rows, want a full page of 50", len(page.Rows))
		}
		return nil
	}}
}

// benchList is scenario 2: a page of 50 from the large archive, at the top
// and 90% deep, against the first page of the small archive.
func benchList(ctx context.Context, cfg *config, rep *report, a archives) error {
	small := deadletter.NewArchive(a.small.Pool, "bench")
	large := deadletter.NewArchive(a.large.Pool, "bench")
	deep, err := cursorAt(ctx, a.large.Pool, "", cfg.LargeN*9/10)
	if err != nil {
		return err
	}
	const cat = deadletter.Conflict
	byCat := deadletter.Filter{Categories: []deadletter.Category{cat}}
	nCat, err := categoryCount(ctx, a.large.Pool, cat)
	if err != nil {
		return err
	}
	deepCat, err := cursorAt(ctx, a.large.Pool, cat, nCat*9/10)
	if err != nil {
		return err
	}
	base := listProbe("small first page", small, deadletter.Filter{}, nil)
	first := listProbe("large first page", large, deadletter.Filter{}, nil)
	deepP := listProbe("large 90% deep", large, deadletter.Filter{}, deep)
	baseCat := listProbe("small first page, category", small, byCat, nil)
	firstCat := listProbe("large first page, category", large, byCat, nil)
	deepCatP := listProbe("large 90% deep, category", large, byCat, deepCat)
	cfg.logf("list: Archive.List limit 50, %d warm-up + %d timed rounds of 6 probes", cfg.Warmup, cfg.Runs)
	if err := measureInterleaved(ctx, cfg.Warmup, cfg.Runs, base, first, deepP, baseCat, firstCat, deepCatP); err != nil {
		return err
	}
	s, l := count(cfg.SmallN), count(cfg.LargeN)
	rep.atMost(fmt.Sprintf("2 list %s first page vs %s first page", l, s), base.median(), first.median(), 1.5)
	rep.atMost(fmt.Sprintf("2 list %s at 90%% cursor vs %s first page", l, s), base.median(), deepP.median(), 1.5)
	rep.atMost(fmt.Sprintf("2 list --reason %s %s first page vs %s", cat, l, s), baseCat.median(), firstCat.median(), 0)
	rep.atMost(fmt.Sprintf("2 list --reason %s %s at 90%% cursor vs %s", cat, l, s), baseCat.median(), deepCatP.median(), 0)
	return nil
}

// benchSummary is scenario 3: what `dlq summary` reads from the archive,
// every signal of it (Archive.Signals: arrival rates over 5 minutes, an
// hour and 24 hours per category, overdue holds with their lateness
// percentiles, counts per category and error class with their attempts,
// the audit row), on the large archive against the small one. Every
// waiting letter of the seeded archives is overdue, as in an incident, so
// the lateness percentiles range over nearly the whole archive. The live
// queues come from the broker, the same for both archives, and are left
// out.
func benchSummary(ctx context.Context, cfg *config, rep *report, a archives) error {
	summaryProbe := func(name string, db *benchDB, want int) *probe {
		arc := deadletter.NewArchive(db.Pool, "bench")
		return &probe{name: name, fn: func(ctx context.Context) error {
			s, err := arc.Signals(ctx, deadletter.SignalsOptions{})
			if err != nil {
				return err
			}
			var total, waiting int64
			for _, c := range s.Categories {
				total += c.Total
				waiting += c.Count
			}
			switch {
			case total != int64(want):
				return fmt.Errorf("summary totals %d letters, want %d", total, want)
			case s.Overdue.Count+s.Overdue.Permanent != waiting || s.Overdue.LatenessP50 == nil:
				return fmt.Errorf("summary finds %d overdue holds (%d failed for good) of %d waiting, want all of them with their lateness",
					s.Overdue.Count, s.Overdue.Permanent, waiting)
			case s.Arrivals.Last24h.Letters == 0 || len(s.ErrorClasses) == 0:
				return fmt.Errorf("summary finds %d arrivals in 24 h and %d error classes, want some", s.Arrivals.Last24h.Letters, len(s.ErrorClasses))
			}
			return nil
		}}
	}
	base := summaryProbe("small summary", a.small, cfg.SmallN)
	subj := summaryProbe("large summary", a.large, cfg.LargeN)
	cfg.logf("summary: Archive.Signals, %d warm-up + %d timed rounds", cfg.Warmup, cfg.Runs)
	if err := measureInterleaved(ctx, cfg.Warmup, cfg.Runs, base, subj); err != nil {
		return err
	}
	rep.atMost(fmt.Sprintf("3 summary, all signals, %s vs %s", count(cfg.LargeN), count(cfg.SmallN)), base.median(), subj.median(), 3)
	return nil
}
