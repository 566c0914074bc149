package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// parseArchiveSize reads -archive's size: a count with an optional k or m
// suffix ("10m", "200k", "50000").
func parseArchiveSize(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	unit := 1
	switch {
	case strings.HasSuffix(s, "m"):
		unit, s = 1_000_000, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "k"):
		unit, s = 1_000, strings.TrimSuffix(s, "k")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid -archive %q: use a count of letters such as 10m, 1m or 200k", s)
	}
	return n * unit, nil
}

// largeArchiveCapture is how many letters each capture of the large-archive
// scenario drains. The archives span 100 days, so that under the policy's
// default retention of 90 days the oldest tenth is past it, as in an
// archive kept for months.
const (
	largeArchiveCapture = 50_000
	largeArchiveSpan    = 100 * 24 * time.Hour
	retentionWindow     = "90d"
)

// benchLargeArchive is the -archive scenario (make bench ARCHIVE=10m): an
// archive of cfg.LargeN letters against one of cfg.SmallN. It reports the
// list pages and the summary at both sizes (the same lines as the default
// run), the capture rate into the large archive against an empty one, a
// purge of the tenth past retention while a capture goes on, the bytes on
// disk per letter, and the peak memory of each command on the large
// archive.
func benchLargeArchive(ctx context.Context, cfg *config, rep *report) error {
	a, err := seedArchives(ctx, cfg, largeArchiveSpan)
	defer a.drop(cfg)
	if err != nil {
		return err
	}
	if err := diskPerLetter(ctx, cfg, rep, a.large); err != nil {
		return err
	}
	for _, step := range []func(context.Context, *config, *report, archives) error{
		benchList, benchSummary, commandMemory, captureIntoLarge, purgeUnderCapture,
	} {
		if err := step(ctx, cfg, rep, a); err != nil {
			if ctx.Err() != nil {
				return err
			}
			rep.failed("archive", err)
		}
	}
	return nil
}

// diskPerLetter reports the bytes on disk per letter of the archive's
// tables, the letters and their states, with their TOAST and indexes, and
// each table's and index's share in a note.
func diskPerLetter(ctx context.Context, cfg *config, rep *report, db *benchDB) error {
	const tables = `ARRAY['expiryctl.dead_letters'::regclass, 'expiryctl.dead_letter_states'::regclass]`
	var total, letters, states int64
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT sum(pg_total_relation_size(t)) FROM unnest(`+tables+`) t)::bigint,
		pg_table_size('expiryctl.dead_letters'), pg_table_size('expiryctl.dead_letter_states')`).Scan(&total, &letters, &states); err != nil {
		return err
	}
	rows, err := db.Pool.Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
		FROM pg_index WHERE indrelid = ANY (`+tables+`) ORDER BY 2 DESC`)
	if err != nil {
		return err
	}
	var parts []string
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return err
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimPrefix(name, "expiryctl."), float64(size)/float64(cfg.LargeN)))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	n := float64(cfg.LargeN)
	rep.lines = append(rep.lines, line{fmt.Sprintf("archive %s bytes on disk per letter", count(cfg.LargeN)), "-",
		fmt.Sprintf("%.0f B (%.1f GB)", float64(total)/n, float64(total)/(1<<30)), "-", "report only", info})
	rep.note("archive %s: per letter, the letters with TOAST %.0f B, their states %.0f B; indexes: %s", count(cfg.LargeN),
		float64(letters)/n, float64(states)/n, strings.Join(parts, ", "))
	return nil
}

// commandMemory runs each reading command on the large archive through
// the built binary and holds its peak memory to the ceiling.
func commandMemory(ctx context.Context, cfg *config, rep *report, a archives) error {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"dlq list (first page)", []string{"dlq", "list"}},
		{"dlq list --reason conflict -o json", []string{"dlq", "list", "--reason", "conflict", "-o", "json"}},
		{"dlq summary", []string{"dlq", "summary", "--work-queue", "expiryctl-bench-absent"}},
		{"dlq list --limit 0 -o json (every letter)", []string{"dlq", "list", "--limit", "0", "-o", "json"}},
	} {
		cfg.logf("archive: %s on %d letters", strings.Join(c.args, " "), cfg.LargeN)
		run, err := runBinary(ctx, cfg.Bin, c.args, cfg.binaryEnv(a.large.URL), false)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		rep.rss(fmt.Sprintf("archive %s %s peak RSS", count(cfg.LargeN), c.name), run.PeakRSS, 100, fmt.Sprintf(" (%s)", fmtDuration(run.Wall)))
	}
	return nil
}

// captureSize is how many letters each capture of the scenario drains: a
// twentieth of the archive, within 1,000 and largeArchiveCapture.
func captureSize(cfg *config) int { return min(largeArchiveCapture, max(cfg.LargeN/20, 1000)) }

// captureRun drains a queue of letters into db with the built binary.
func captureRun(ctx context.Context, cfg *config, db *benchDB, queue string) (procRun, error) {
	return runBinary(ctx, cfg.Bin, []string{"dlq", "ingest", "--queue", queue}, cfg.binaryEnv(db.URL), false)
}

// captureIntoLarge captures the same letters into an empty archive, then
// into the large one, then into another empty one: the empty runs bracket
// the large one, so that what else the machine does weighs on both.
func captureIntoLarge(ctx context.Context, cfg *config, rep *report, a archives) error {
	n := captureSize(cfg)
	q, err := filledQueues(ctx, cfg, map[string]int{"empty1": n, "large": n, "empty2": n})
	defer q.delete(cfg)
	if err != nil {
		return err
	}
	before, large, after := q.names["empty1"], q.names["large"], q.names["empty2"]
	var empties [2]*benchDB
	if empties[0], err = createDB(ctx, cfg.AdminURL, "empty"); err != nil {
		return err
	}
	defer cfg.dropDB(empties[0])
	if empties[1], err = createDB(ctx, cfg.AdminURL, "empty"); err != nil {
		return err
	}
	defer cfg.dropDB(empties[1])
	var emptyRates []float64
	var largeRun procRun
	for i, q := range []string{before, large, after} {
		db := a.large
		if q != large {
			db = empties[i/2]
		}
		run, err := captureRun(ctx, cfg, db, q)
		if err != nil {
			return err
		}
		rate := float64(n) / run.Wall.Seconds()
		cfg.logf("archive: captured %d from %s in %s = %.0f msg/s", n, q, run.Wall.Round(time.Millisecond), rate)
		if q == large {
			largeRun = run
		} else {
			emptyRates = append(emptyRates, rate)
		}
	}
	if err := expectArchived(ctx, a.large.Pool, cfg.LargeN+n); err != nil {
		return err
	}
	emptyRate := (emptyRates[0] + emptyRates[1]) / 2
	rep.atLeast(fmt.Sprintf("archive capture into %s vs into an empty archive", count(cfg.LargeN)), emptyRate,
		float64(n)/largeRun.Wall.Seconds(), "msg/s", 0.8)
	rep.rss(fmt.Sprintf("archive %s dlq ingest peak RSS", count(cfg.LargeN)), largeRun.PeakRSS, 100, fmt.Sprintf(" (%s)", fmtDuration(largeRun.Wall)))
	return nil
}

// purgeUnderCapture purges the tenth of the large archive past retention
// while a capture into the same archive goes on, and reports the purge's
// rate and the capture's rate meanwhile against a capture alone: a purge
// in bounded transactions must not hold capture up.
func purgeUnderCapture(ctx context.Context, cfg *config, rep *report, a archives) error {
	n := captureSize(cfg)
	q, err := filledQueues(ctx, cfg, map[string]int{"alone": n, "during": n})
	defer q.delete(cfg)
	if err != nil {
		return err
	}
	alone, during := q.names["alone"], q.names["during"]
	aloneRun, err := captureRun(ctx, cfg, a.large, alone)
	if err != nil {
		return err
	}

	// The purge's cutoff is its start less the retention: what it must
	// redact is what was past retention before it started, however long it
	// runs.
	var wantPurged int64
	var cutoff time.Time
	if err := a.large.Pool.QueryRow(ctx, `SELECT now() - (SELECT retention FROM expiryctl.policy)`).Scan(&cutoff); err != nil {
		return err
	}
	if err := a.large.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters
		WHERE ingested_at < $1 AND redacted_at IS NULL`, cutoff).Scan(&wantPurged); err != nil {
		return err
	}
	window := retentionWindow
	cfg.logf("archive: dlq purge --older-than %s (%d letters) while capturing %d letters into the same archive", window, wantPurged, n)
	var purge procRun
	var purgeErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		purge, purgeErr = runBinary(ctx, cfg.Bin, []string{"dlq", "purge", "--older-than", window, "--yes"}, cfg.binaryEnv(a.large.URL), false)
	}()
	// The capture starts once the purge has redacted its first batch.
	if err := waitForPurge(ctx, a.large.Pool); err != nil {
		return err
	}
	duringRun, err := captureRun(ctx, cfg, a.large, during)
	wg.Wait()
	if err = errors.Join(err, purgeErr); err != nil {
		return err
	}
	var left int64
	if err := a.large.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters
		WHERE ingested_at < $1 AND redacted_at IS NULL`, cutoff).Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("the purge left %d letters past retention with their payload", left)
	}
	if duringRun.Wall > purge.Wall {
		rep.note("archive: the capture during the purge outlasted it (%s vs %s): its rate is partly that of a capture alone", fmtDuration(duringRun.Wall), fmtDuration(purge.Wall))
	}
	rep.lines = append(rep.lines, line{fmt.Sprintf("archive dlq purge of %s past retention in %s", count(int(wantPurged)), count(cfg.LargeN)), "-",
		fmt.Sprintf("%.0f letters/s (%s)", float64(wantPurged)/purge.Wall.Seconds(), fmtDuration(purge.Wall)), "-", "report only", info})
	rep.atLeast("archive capture during the purge vs capture alone", float64(n)/aloneRun.Wall.Seconds(),
		float64(n)/duringRun.Wall.Seconds(), "msg/s", 0.5)
	rep.rss(fmt.Sprintf("archive %s dlq purge peak RSS", count(cfg.LargeN)), purge.PeakRSS, 100, "")
	return nil
}

// waitForPurge waits for the first batch a purge redacted, by its audit
// row, for at most a minute.
func waitForPurge(ctx context.Context, pool *pgxpool.Pool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var batches int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.purge.batch'`).Scan(&batches); err != nil {
			return err
		}
		if batches > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the purge redacted no batch within a minute")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
