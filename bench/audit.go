package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/audittest"
)

// benchAudit measures the audit trail against a bare COPY of the same rows,
// in the same run: export (ndjson) at ≥ 0.7× its rate with peak RSS under
// 64 MB, verification at ≥ 0.5×, and what writing the audit row adds to a
// command, comparing the built binary with one built with the
// expiryctl_noaudit tag (a benchmark switch, not a user option).
func benchAudit(ctx context.Context, cfg *config, rep *report) error {
	n := int64(1_000_000)
	switch {
	case cfg.Smoke:
		// Above the 10k trail the checkpoint lines compare against.
		n = 20_000
	case cfg.Quick:
		n = 50_000
	}
	db, err := createDB(ctx, cfg.AdminURL, "audit")
	if err != nil {
		return err
	}
	defer cfg.dropDB(db)
	start := time.Now()
	head, err := seedAuditChain(ctx, db.Pool, n)
	if err != nil {
		return err
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE expiryctl.audit_log"); err != nil {
		return err
	}
	cfg.logf("audit: seeded %d chained rows in %s", n, time.Since(start).Round(time.Millisecond))

	bare := &probe{name: "bare COPY", fn: func(ctx context.Context) error {
		conn, err := db.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		_, err = conn.Conn().PgConn().CopyTo(ctx, io.Discard, `COPY (SELECT * FROM expiryctl.audit_log) TO STDOUT`)
		return err
	}}
	export := &probe{name: "export", fn: func(ctx context.Context) error {
		res, err := audit.Export(ctx, db.Pool, io.Discard, audit.NDJSON, audit.Filter{ThroughSeq: head.Seq})
		if err == nil && res.Rows != n {
			err = fmt.Errorf("exported %d rows, want %d", res.Rows, n)
		}
		return err
	}}
	verify := &probe{name: "verify", fn: func(ctx context.Context) error {
		res, err := audit.VerifyDB(ctx, db.Pool, 0, &head)
		if err == nil && res.Rows < n {
			err = fmt.Errorf("verified %d rows, want %d", res.Rows, n)
		}
		return err
	}}
	if err := measureInterleaved(ctx, 1, 3, bare, export, verify); err != nil {
		return err
	}
	rate := func(p *probe) float64 { return float64(n) / p.median().Seconds() }
	rep.atLeast(fmt.Sprintf("5 audit export %s ndjson vs bare COPY", count(int(n))), rate(bare), rate(export), "rows/s", 0.7)
	rep.atLeast(fmt.Sprintf("5 audit verify %s vs bare COPY", count(int(n))), rate(bare), rate(verify), "rows/s", 0.5)

	out := filepath.Join(os.TempDir(), "expiryctl-bench-"+runID+"-audit.ndjson")
	defer os.Remove(out)
	run, err := runBinary(ctx, cfg.Bin, []string{"audit", "export", "-o", "ndjson", "--out", out}, cfg.binaryEnv(db.URL), false)
	if err != nil {
		return err
	}
	rep.rss(fmt.Sprintf("5 audit export %s: peak RSS of the binary", count(int(n))), run.PeakRSS, 64, "")

	if err := benchCheckpoint(ctx, cfg, rep, db, bare); err != nil {
		return err
	}
	return benchAuditCost(ctx, cfg, rep, db)
}

// benchAuditCost times commands with and without the audit row,
// interleaved, on the same database: the trail seeded above and an archive
// of cfg.SmallN letters, so that `dlq list --limit 50` lists 50 letters as it
// does during an incident.
func benchAuditCost(ctx context.Context, cfg *config, rep *report, db *benchDB) error {
	took, err := seedArchive(ctx, db, cfg.SmallN, time.Now(), seedSpan)
	if err != nil {
		return err
	}
	cfg.logf("audit: seeded %d letters in %s", cfg.SmallN, took.Round(time.Millisecond))
	if err := db.settle(ctx, func(f string, a ...any) { cfg.logf("audit: "+f, a...) }); err != nil {
		return err
	}
	noaudit := filepath.Join(os.TempDir(), "expiryctl-bench-"+runID+"-noaudit")
	defer os.Remove(noaudit)
	build := exec.CommandContext(ctx, "go", "build", "-tags", "expiryctl_noaudit", "-o", noaudit, "github.com/expiryctl/expiryctl/cmd/expiryctl")
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the no-audit binary: %w\n%s", err, msg)
	}
	for _, c := range []struct {
		command []string
		ceiling float64
	}{
		// A triage read: the command an on-call engineer runs most, here
		// listing a full page.
		{[]string{"dlq", "list", "--limit", "50", "-o", "json"}, 1.25},
		// The lightest command there is, for reference: nearly all of it is
		// process start and connection, so the audit row weighs the most.
		{[]string{"dlq", "summary", "-o", "json"}, 0},
	} {
		with := &probe{name: "with audit", fn: func(ctx context.Context) error {
			_, err := runBinary(ctx, cfg.Bin, c.command, cfg.binaryEnv(db.URL), false)
			return err
		}}
		without := &probe{name: "without audit", fn: func(ctx context.Context) error {
			_, err := runBinary(ctx, noaudit, c.command, cfg.binaryEnv(db.URL), false)
			return err
		}}
		if err := measureInterleaved(ctx, cfg.Warmup, cfg.Runs, without, with); err != nil {
			return err
		}
		rep.atMost(fmt.Sprintf("5 audit row cost: `%s` with vs without", strings.Join(c.command, " ")), without.median(), with.median(), c.ceiling)
	}
	return nil
}

// seedAuditChain appends n chained rows by COPY (see audittest.SeedChain):
// a million single-row INSERTs, each taking the append lock and committing,
// would take many minutes.
func seedAuditChain(ctx context.Context, pool *pgxpool.Pool, n int64) (audit.Anchor, error) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	actions := []string{"dlq.list", "dlq.show", "dlq.ingest.batch", "dlq.summary", "replay.request"}
	return audittest.SeedChain(ctx, pool, n, func(seq int64) audit.ChainFields {
		return audit.ChainFields{AtMicros: base + seq*1000, Actor: "oncall", DBRole: "root",
			Action: actions[seq%int64(len(actions))], Target: fmt.Sprintf("dead_letter:%d", seq),
			// jsonb's own text form, so that the hash PostgreSQL computes matches.
			Details: fmt.Sprintf(`{"limit": 50, "returned": %d}`, seq%51), Outcome: "ok"}
	})
}
