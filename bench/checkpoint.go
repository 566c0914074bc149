package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/expiryctl/expiryctl/audit"
)

// benchCheckpoint measures the trail's tree on the seeded trail of n rows
// (db, head) against a bare COPY of it, in the same run: an evidence export
// of every row with its inclusion proof at ≥ 0.5× the COPY, and the
// verification of a whole-trail file, count tree included, at ≥ 0.4×; and, against a trail of 10k rows, that a
// checkpoint and one row's proof cost at most 2× at n what they cost at 10k
// (they read O(log n) stored hashes, not the trail).
func benchCheckpoint(ctx context.Context, cfg *config, rep *report, db *benchDB, bare *probe) error {
	skey, vkey, err := audit.GenerateKey("bench")
	if err != nil {
		return err
	}
	start := time.Now()
	cp, err := audit.SignCheckpoint(ctx, db.Pool, "bench", skey)
	if err != nil {
		return err
	}
	// The checkpoint covers the seeded rows and those the scenario wrote
	// since (the binary's export); the evidence is every row it covers.
	n := cp.Size
	cfg.logf("checkpoint: built the tree of %d rows and signed it in %s", n, time.Since(start).Round(time.Millisecond))
	rep.note("audit tree: first extension over %d rows and checkpoint in %s (once per trail)", n, fmtDuration(time.Since(start)))

	// A whole-trail export carries no proofs (its verifier recomputes the
	// root); a filter that keeps every row all the same gives each row its
	// proof, which is the export's cost measured here.
	through := audit.Filter{ThroughSeq: n}
	proved := audit.Filter{ThroughSeq: n, Since: time.Unix(0, 0).UTC()}
	export := &probe{name: "evidence export", fn: func(ctx context.Context) error {
		res, err := audit.ExportEvidence(ctx, db.Pool, io.Discard, proved)
		if err == nil && res.Proved != n {
			err = fmt.Errorf("proved %d rows, want %d", res.Proved, n)
		}
		return err
	}}
	file := filepath.Join(os.TempDir(), "expiryctl-bench-"+runID+"-evidence.ndjson")
	defer os.Remove(file)
	if err := writeEvidence(ctx, db, file, through); err != nil {
		return err
	}
	proofFile := file + ".proofs"
	defer os.Remove(proofFile)
	if err := writeEvidence(ctx, db, proofFile, proved); err != nil {
		return err
	}
	for _, f := range []struct{ what, path string }{{"whole-trail evidence (no proofs)", file}, {"evidence with a proof a row", proofFile}} {
		if fi, err := os.Stat(f.path); err == nil {
			rep.note("audit %s of %d rows: %.1f MB, %.0f bytes a row", f.what, n, float64(fi.Size())/1e6, float64(fi.Size())/float64(n))
		}
	}
	verify := &probe{name: "evidence verify", fn: func(ctx context.Context) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		res, err := audit.VerifyEvidence(ctx, f, file, vkey)
		if err == nil && res.Proved != n {
			err = fmt.Errorf("proved %d rows, want %d", res.Proved, n)
		}
		return err
	}}
	if err := measureInterleaved(ctx, 0, 3, bare, export, verify); err != nil {
		return err
	}
	rate := func(p *probe) float64 { return float64(n) / p.median().Seconds() }
	rep.atLeast(fmt.Sprintf("5 audit export %s with inclusion proofs vs bare COPY", count(int(n))), rate(bare), rate(export), "rows/s", 0.5)
	// Verifying a whole-trail file also recounts the checkpoint's count
	// tree from its rows (on a second goroutine): a million distinct
	// targets, the bench's, cost 0.5 s of CPU and about 150 MB that the
	// 0.5× this target had before the count tree did not include.
	rep.atLeast(fmt.Sprintf("5 audit verify --file of whole-trail evidence %s vs bare COPY", count(int(n))), rate(bare), rate(verify), "rows/s", 0.4)

	small, err := createDB(ctx, cfg.AdminURL, "audit10k")
	if err != nil {
		return err
	}
	defer cfg.dropDB(small)
	if _, err := seedAuditChain(ctx, small.Pool, 10_000); err != nil {
		return err
	}
	if _, err := audit.SignCheckpoint(ctx, small.Pool, "bench", skey); err != nil {
		return err
	}
	checkpointAt := func(d *benchDB) *probe {
		return &probe{name: "checkpoint", fn: func(ctx context.Context) error {
			_, err := audit.SignCheckpoint(ctx, d.Pool, "bench", skey)
			return err
		}}
	}
	// One row, picked by its target (an index lookup), with its proof.
	proveAt := func(d *benchDB) *probe {
		return &probe{name: "proof", fn: func(ctx context.Context) error {
			res, err := audit.ExportEvidence(ctx, d.Pool, io.Discard, audit.Filter{Target: "dead_letter:5000"})
			if err == nil && res.Proved != 1 {
				err = fmt.Errorf("proved %d rows, want 1", res.Proved)
			}
			return err
		}}
	}
	cpSmall, cpLarge := checkpointAt(small), checkpointAt(db)
	proofSmall, proofLarge := proveAt(small), proveAt(db)
	if err := measureInterleaved(ctx, cfg.Warmup, cfg.Runs, cpSmall, cpLarge, proofSmall, proofLarge); err != nil {
		return err
	}
	rep.atMost(fmt.Sprintf("5 audit checkpoint at %s rows vs at 10k", count(int(n))), cpSmall.median(), cpLarge.median(), 2)
	rep.atMost(fmt.Sprintf("5 one row's inclusion proof at %s rows vs at 10k", count(int(n))), proofSmall.median(), proofLarge.median(), 2)
	return nil
}

func writeEvidence(ctx context.Context, db *benchDB, path string, f audit.Filter) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	if _, err := audit.ExportEvidence(ctx, db.Pool, w, f); err != nil {
		_ = out.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
