package audit_test

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/audit"
)

// TestExportVerifyRates measures Export (ndjson) and VerifyDB against a bare
// `COPY (SELECT * FROM expiryctl.audit_log) TO STDOUT` of the same rows into
// a discarding writer, the targets being 0.7× and 0.5× of the COPY's rate.
// It seeds EXPIRYCTL_AUDIT_PERF_ROWS rows (a million for the real
// measurement) and is skipped without that variable: it takes a minute.
//
//	EXPIRYCTL_AUDIT_PERF_ROWS=1000000 go test -run TestExportVerifyRates -v ./audit/
func TestExportVerifyRates(t *testing.T) {
	rowsEnv := os.Getenv("EXPIRYCTL_AUDIT_PERF_ROWS")
	if rowsEnv == "" {
		t.Skip("set EXPIRYCTL_AUDIT_PERF_ROWS (e.g. 1000000) to measure export and verify rates")
	}
	n, err := strconv.ParseInt(rowsEnv, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("EXPIRYCTL_AUDIT_PERF_ROWS=%q: want a positive number", rowsEnv)
	}
	ctx := context.Background()
	start := time.Now()
	db, head := newTrail(t, n)
	t.Logf("seeded %d rows in %s", n, time.Since(start).Round(time.Millisecond))
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE expiryctl.audit_log"); err != nil {
		t.Fatal(err)
	}

	best := func(name string, fn func() error) time.Duration {
		var min time.Duration
		for i := 0; i < 3; i++ {
			s := time.Now()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d := time.Since(s); min == 0 || d < min {
				min = d
			}
		}
		t.Logf("%-8s best of 3: %s (%.0f rows/s)", name, min.Round(time.Millisecond), float64(n)/min.Seconds())
		return min
	}
	bare := best("COPY", func() error { return bareCopy(ctx, db.Pool) })
	export := best("export", func() error {
		res, err := audit.Export(ctx, db.Pool, io.Discard, audit.NDJSON, audit.Filter{})
		if err == nil && res.Head != head {
			t.Errorf("export head %v, want %v", res.Head, head)
		}
		return err
	})
	verify := best("verify", func() error {
		res, err := audit.VerifyDB(ctx, db.Pool, 0, &head)
		if err == nil && res.Rows != n {
			t.Errorf("verified %d rows, want %d", res.Rows, n)
		}
		return err
	})
	exportRatio, verifyRatio := bare.Seconds()/export.Seconds(), bare.Seconds()/verify.Seconds()
	t.Logf("export/COPY rate = %.2f (target ≥ 0.7), verify/COPY rate = %.2f (target ≥ 0.5)", exportRatio, verifyRatio)
	if exportRatio < 0.7 {
		t.Errorf("export rate is %.2f× COPY's, want ≥ 0.7×", exportRatio)
	}
	if verifyRatio < 0.5 {
		t.Errorf("verify rate is %.2f× COPY's, want ≥ 0.5×", verifyRatio)
	}
	if path := os.Getenv("EXPIRYCTL_AUDIT_PERF_KEEP"); path != "" {
		// For measuring the built binary (peak RSS) on the same rows.
		if err := os.WriteFile(path, []byte(db.URL+"\n"+head.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("database %s; waiting for %s to be removed", db.URL, path)
		for {
			if _, err := os.Stat(path); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
	}
}

func bareCopy(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Conn().PgConn().CopyTo(ctx, io.Discard, `COPY (SELECT * FROM expiryctl.audit_log) TO STDOUT`)
	return err
}
