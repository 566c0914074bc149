package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// exportColumns are the columns `dlq list` reads, in its order.
const exportColumns = `id, message_id, reservation_id, idempotency_key, dead_letters.reason_category,
	dead_letters.error_class, dead_letters.attempts, status, dead_letters.source_queue, dead_letters.dead_lettered_at,
	dead_letters.due_at, last_error, previous_id, replay_request_id`

// benchExport is scenario 4: `dlq list --limit 0 -o json` over the whole
// large archive, to /dev/null, through the built binary. Its peak memory has
// a ceiling; its rate is reported beside what PostgreSQL alone needs to send
// the same rows in the same order (COPY to a discarding writer).
func benchExport(ctx context.Context, cfg *config, rep *report, a archives) error {
	cfg.logf("export: reference: COPY of the listed columns in list order from %s", a.large.Name)
	copyDur, err := copyAll(ctx, a.large)
	if err != nil {
		return err
	}
	cfg.logf("export: %s dlq list --limit 0 -o json > /dev/null on %d letters", cfg.Bin, cfg.LargeN)
	mon := startCPU()
	run, err := runBinary(ctx, cfg.Bin, []string{"dlq", "list", "--limit", "0", "-o", "json"}, cfg.binaryEnv(a.large.URL), false)
	use := mon.Stop()
	if err != nil {
		return err
	}
	rep.note("export binary: %s (expiryctl by rusage %.1fs) in %s", use, run.CPU.Seconds(), fmtDuration(run.Wall))
	// stdout went to /dev/null; the command's own audit row says how many
	// rows it wrote.
	var returned int
	if err := a.large.Pool.QueryRow(ctx, `SELECT (details->>'returned')::int FROM expiryctl.audit_log
		WHERE action = 'dlq.list' AND actor = 'bench-binary' ORDER BY seq DESC LIMIT 1`).Scan(&returned); err != nil {
		return fmt.Errorf("read the export's audit row: %w", err)
	}
	if returned != cfg.LargeN {
		return fmt.Errorf("dlq list --limit 0 wrote %d rows, want %d", returned, cfg.LargeN)
	}
	copyRate := float64(cfg.LargeN) / copyDur.Seconds()
	rate := float64(cfg.LargeN) / run.Wall.Seconds()
	cfg.logf("export: %d rows in %s = %.0f rows/s (COPY: %s = %.0f rows/s), peak RSS %.1f MB", cfg.LargeN,
		run.Wall.Round(time.Millisecond), rate, copyDur.Round(time.Millisecond), copyRate, float64(run.PeakRSS)/(1<<20))
	rep.throughputInfo(fmt.Sprintf("4 list --limit 0 -o json %s vs COPY", count(cfg.LargeN)), copyRate, rate, "rows/s")
	rep.rss(fmt.Sprintf("4 list --limit 0 -o json %s peak RSS", count(cfg.LargeN)), run.PeakRSS, 100,
		fmt.Sprintf(" (%s)", fmtDuration(run.Wall)))
	return nil
}

func copyAll(ctx context.Context, db *benchDB) (time.Duration, error) {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	start := time.Now()
	_, err = conn.Conn().PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT "+exportColumns+
		" FROM expiryctl.dead_letters JOIN expiryctl.dead_letter_states ON dead_letter_id = id"+
		" ORDER BY dead_letters.dead_lettered_at DESC, id DESC) TO STDOUT")
	return time.Since(start), err
}
