package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// queueTarget is the target seedRow gives every row of seq ≡ 2 (mod 5).
const queueTarget = "queue:reservation-expiry.dlq"

// exportFiltered exports f as evidence from db.
func exportFiltered(t *testing.T, db *pgtest.Database, f audit.Filter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, f); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFilteredEvidenceIsProvedComplete: an export filtered on one of
// action, actor and target proves, with the checkpoint's count tree, that
// it holds every row of its value up to the checkpoint; a value no row
// holds is proved absent, wherever it sorts.
func TestFilteredEvidenceIsProvedComplete(t *testing.T) {
	t.Parallel()
	db, cp, vkey := checkpointed(t, 40)
	if cp.Counts.IsZero() {
		t.Fatalf("the checkpoint carries no count tree:\n%s", cp.Note)
	}
	seedChain(t, db.Pool, 10) // rows newer than the checkpoint, unproven
	cases := []struct {
		filter       audit.Filter
		count, first int64
		newest       int64
	}{
		{audit.Filter{Target: queueTarget}, 8, 2, 37},
		{audit.Filter{Action: "dlq.show"}, 8, 1, 36},
		{audit.Filter{Actor: "bob"}, 10, 1, 37},
		{audit.Filter{Target: "replay_request:4"}, 1, 4, 4},
		{audit.Filter{Target: "replay_request:400"}, 0, 0, 0},         // between two targets
		{audit.Filter{Action: "a.first.action"}, 0, 0, 0},             // before every leaf
		{audit.Filter{Target: "~ after every target"}, 0, 0, 0},       // after every leaf
		{audit.Filter{Actor: "oncall-ünïcode"}, 10, 2, 38},            // unicode, compared by its bytes
		{audit.Filter{Target: queueTarget, ThroughSeq: 40}, 8, 2, 37}, // as `audit export` writes it
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c.filter), func(t *testing.T) {
			t.Parallel()
			file := exportFiltered(t, db, c.filter)
			res, err := audit.VerifyEvidence(context.Background(), bytes.NewReader(file), "f", vkey)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Complete || res.Count == nil || res.Count.Count != c.count || res.Count.Newest != c.newest || res.Proved != c.count {
				t.Fatalf("VerifyEvidence = %+v (count %+v), want complete with %d rows proved, the newest %d", res, res.Count, c.count, c.newest)
			}
		})
	}
}

// TestFilteredEvidenceWithheldRowsAreCaught: rows withheld from a
// filtered evidence file and from its list, in the middle or at the end,
// are caught offline, as are a count proof taken out, edited or replaced
// by the leaves beside it, and a filter relabelled.
func TestFilteredEvidenceWithheldRowsAreCaught(t *testing.T) {
	t.Parallel()
	db, _, vkey := checkpointed(t, 40)
	file := exportFiltered(t, db, audit.Filter{Target: queueTarget})
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("the export has %d lines, want a header and 8 rows:\n%s", len(lines), file)
	}
	header := func(f func(map[string]any)) string { return editedHeader(t, lines[0], f) }
	without := func(rows ...int) []string {
		var out []string
		for i, l := range lines[1:] {
			if !containsInt(rows, i+1) {
				out = append(out, l)
			}
		}
		return out
	}
	// The bucket of another target, real and signed: a proof of the wrong
	// value.
	var elsewhere map[string]any
	{
		var h map[string]any
		other := exportFiltered(t, db, audit.Filter{Target: "replay_request:4"})
		if err := json.Unmarshal(bytes.SplitN(other, []byte("\n"), 2)[0], &h); err != nil {
			t.Fatal(err)
		}
		elsewhere = h["counts"].(map[string]any)
	}
	cases := []struct {
		name  string
		lines []string
		want  audit.Problem
	}{
		{"a middle row withheld with its listing", append([]string{header(unlisted(17))}, without(4)...), audit.Incomplete},
		{"the newest row withheld with its listing", append([]string{header(unlisted(37))}, without(8)...), audit.Incomplete},
		{"two rows withheld and the count proof taken out", append([]string{header(func(h map[string]any) {
			unlisted(2)(h)
			unlisted(37)(h)
			delete(h, "counts")
		})}, without(1, 8)...), audit.Incomplete},
		{"the count edited to match", append([]string{header(func(h map[string]any) {
			unlisted(37)(h)
			for _, leaf := range h["counts"].(map[string]any)["leaves"].([]any) {
				if leaf := leaf.(map[string]any); leaf["value"] == queueTarget {
					leaf["count"], leaf["newest"] = 7, 32
				}
			}
		})}, without(8)...), audit.Incomplete},
		{"the value's leaf taken out of its bucket, and every row with it", []string{header(func(h map[string]any) {
			bucket := h["counts"].(map[string]any)
			var kept []any
			for _, leaf := range bucket["leaves"].([]any) {
				if leaf.(map[string]any)["value"] != queueTarget {
					kept = append(kept, leaf)
				}
			}
			bucket["leaves"] = kept
			h["matched"] = []any{}
		})}, audit.Incomplete},
		{"another value's bucket in its place", []string{header(func(h map[string]any) {
			h["counts"] = elsewhere
			h["matched"] = []any{}
		})}, audit.Incomplete},
		{"relabelled with a second filter", append([]string{header(func(h map[string]any) {
			h["filter"].(map[string]any)["action"] = "dlq.ingest.batch"
		})}, without()...), audit.Malformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(c.lines, "\n")+"\n"), "f", vkey)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) || chainErr.Problem != c.want {
				t.Fatalf("VerifyEvidence = %v, want %s", err, c.want)
			}
			t.Log(err)
		})
	}

	// Relabelled to a filter no count tree settles, with the proof taken
	// out: it verifies, as a file proved row by row and not complete.
	relabelled := append([]string{header(func(h map[string]any) {
		h["filter"].(map[string]any)["since"] = "1970-01-01T00:00:00Z"
		delete(h, "counts")
	})}, without()...)
	res, err := audit.VerifyEvidence(context.Background(), strings.NewReader(strings.Join(relabelled, "\n")+"\n"), "f", vkey)
	if err != nil || res.Complete || res.Unproven == "" {
		t.Fatalf("a file relabelled with a time window: %+v, %v; want it verified and not proved complete", res, err)
	}
}

func containsInt(s []int, v int) bool { return slices.Contains(s, v) }

// TestExportRefusesRowsRemovedSinceTheCheckpoint: a superuser who deletes a
// checkpointed row (the approval, say) and exports its target cannot get a
// file out of expiryctl: the rows no longer give the signed counts.
func TestExportRefusesRowsRemovedSinceTheCheckpoint(t *testing.T) {
	t.Parallel()
	db, _, _ := checkpointed(t, 40)
	tamper(t, db.Superuser(t), `DELETE FROM expiryctl.audit_log WHERE seq = 17`)
	var buf bytes.Buffer
	_, err := audit.ExportEvidence(context.Background(), db.Pool, &buf, audit.Filter{Target: queueTarget})
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.CheckpointMismatch {
		t.Fatalf("ExportEvidence after a row was deleted = %v, want %s", err, audit.CheckpointMismatch)
	}
	t.Log(err)
}

// TestSignerVouchesOnlyForWhatItChecked: the signer counts and hashes the
// rows itself, so a database that hides rows from its login (a row-level
// security policy a superuser adds), or whose stored tree or rows were
// rewritten, gets no checkpoint; and the counts it keeps from one
// checkpoint to the next are the counts of the rows.
func TestSignerVouchesOnlyForWhatItChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hide := func(t *testing.T, db *pgtest.Database, seq int) {
		t.Helper()
		super := db.Superuser(t)
		for _, sql := range []string{
			fmt.Sprintf(`CREATE POLICY hide_one ON expiryctl.audit_log AS RESTRICTIVE FOR SELECT USING (seq <> %d)`, seq),
		} {
			if _, err := super.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		attack func(t *testing.T, db *pgtest.Database)
		want   audit.Problem
	}{
		{"a new row hidden from the signer", func(t *testing.T, db *pgtest.Database) { hide(t, db, 45) }, audit.Gap},
		{"a count of the signed rows changed", func(t *testing.T, db *pgtest.Database) {
			if _, err := db.Superuser(t).Exec(ctx, `UPDATE expiryctl.audit_count_leaves SET rows = rows - 1 WHERE field = 'actor' AND value = 'alice'`); err != nil {
				t.Fatal(err)
			}
		}, audit.CheckpointMismatch},
		{"the count tree rewritten to agree", func(t *testing.T, db *pgtest.Database) {
			super := db.Superuser(t)
			for _, sql := range []string{
				`DELETE FROM expiryctl.audit_count_leaves WHERE field = 'target' AND value = 'replay_request:4'`,
				`DELETE FROM expiryctl.audit_count_tree`,
				`UPDATE expiryctl.audit_trail SET counts_size = 0`,
			} {
				if _, err := super.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
		}, audit.CheckpointMismatch},
		{"the stored tree rewritten", func(t *testing.T, db *pgtest.Database) {
			// The root of the first 32 records: part of every later root.
			tamperTree(t, db, fmt.Sprintf(`UPDATE expiryctl.audit_tree SET hash = sha256(hash) WHERE idx = %d`, tlog.StoredHashIndex(5, 0)))
		}, audit.CheckpointMismatch},
		{"a signed row rewritten with the rest rechained", func(t *testing.T, db *pgtest.Database) {
			super := db.Superuser(t)
			tamper(t, super, `UPDATE expiryctl.audit_log SET target = 'dead_letter:666' WHERE seq = 12`)
			tamper(t, super, fmt.Sprintf(rechainFrom, 12))
		}, audit.CheckpointMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, _ := newTrail(t, 40)
			audrey := db.Login(t, "audrey", "expiryctl_auditor")
			skey, _, err := audit.GenerateKey("audrey-audit")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := audit.SignCheckpoint(ctx, audrey.Pool, "audrey", skey); err != nil {
				t.Fatal(err)
			}
			seedChain(t, db.Pool, 10)
			c.attack(t, db)
			_, err = audit.SignCheckpoint(ctx, audrey.Pool, "audrey", skey)
			var chainErr *audit.ChainError
			if !errors.As(err, &chainErr) || chainErr.Problem != c.want {
				t.Fatalf("SignCheckpoint = %v, want %s", err, c.want)
			}
			t.Log(err)
		})
	}

	t.Run("a signed row hidden from the signer changes nothing it signs", func(t *testing.T) {
		t.Parallel()
		db, _ := newTrail(t, 40)
		audrey := db.Login(t, "audrey", "expiryctl_auditor")
		skey, _, _ := audit.GenerateKey("audrey-audit")
		if _, err := audit.SignCheckpoint(ctx, audrey.Pool, "audrey", skey); err != nil {
			t.Fatal(err)
		}
		seedChain(t, db.Pool, 10)
		hide(t, db, 17)
		cp, err := audit.SignCheckpoint(ctx, audrey.Pool, "audrey", skey)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := audit.VerifyAgainstCheckpoint(ctx, db.Pool, cp); err != nil {
			t.Fatalf("the counts signed with row 17 hidden are not the rows': %v", err)
		}
	})

	t.Run("counts carried from one checkpoint to the next", func(t *testing.T) {
		t.Parallel()
		db, _ := newTrail(t, 40)
		skey, _, _ := audit.GenerateKey("first")
		if _, err := audit.SignCheckpoint(ctx, db.Pool, "audrey", skey); err != nil {
			t.Fatal(err)
		}
		seedChain(t, db.Pool, 23)
		carried, err := audit.SignCheckpoint(ctx, db.Pool, "audrey", skey)
		if err != nil {
			t.Fatal(err)
		}
		// Another key has signed nothing here: it counts from the first row.
		other, _, _ := audit.GenerateKey("second")
		fresh, err := audit.SignCheckpoint(ctx, db.Pool, "audrey", other)
		if err != nil {
			t.Fatal(err)
		}
		if carried.Size != 64 || fresh.Size != 65 || carried.Counts.IsZero() || fresh.Counts.IsZero() {
			t.Fatalf("carried %d rows %+v, fresh %d rows %+v", carried.Size, carried.Counts, fresh.Size, fresh.Counts)
		}
		// And checking the trail against each recounts its rows.
		for _, cp := range []audit.Checkpoint{carried, fresh} {
			if _, _, err := audit.VerifyAgainstCheckpoint(ctx, db.Pool, cp); err != nil {
				t.Fatalf("the checkpoint of %d rows: %v", cp.Size, err)
			}
		}
	})
}

// TestWrongCountsAreCaught: a checkpoint whose count tree is not the
// rows' (a signer that counted wrong, or was fed other rows) fails the
// verification of the database against it and of a whole-trail file.
func TestWrongCountsAreCaught(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 30)
	skey, vkey, _ := audit.GenerateKey("audrey-audit")
	cp, err := audit.SignCheckpoint(ctx, db.Pool, "audrey", skey)
	if err != nil {
		t.Fatal(err)
	}
	// Another honest trail's count tree, in this trail's checkpoint.
	_, otherCP, _ := checkpointed(t, 31)
	text := fmt.Sprintf("%s\n%d\n%s\ncounts %d %s\n", cp.Origin, cp.Size, cp.Root, otherCP.Counts.Buckets, otherCP.Counts.Root)
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := audit.OpenCheckpoint(forged, vkey)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = audit.VerifyAgainstCheckpoint(ctx, db.Pool, wrong)
	var chainErr *audit.ChainError
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.CheckpointMismatch {
		t.Fatalf("VerifyAgainstCheckpoint with wrong counts = %v, want %s", err, audit.CheckpointMismatch)
	}
	t.Log(err)
	if _, err := db.Superuser(t).Exec(ctx, `INSERT INTO expiryctl.audit_checkpoints (tree_size, root_hash, signed_note) VALUES ($1, $2, $3)`,
		cp.Size, cp.Root[:], string(forged)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := audit.ExportEvidence(ctx, db.Pool, &buf, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	_, err = audit.VerifyEvidence(ctx, &buf, "all", vkey)
	if !errors.As(err, &chainErr) || chainErr.Problem != audit.CheckpointMismatch {
		t.Fatalf("a whole-trail file under wrong counts = %v, want %s", err, audit.CheckpointMismatch)
	}
	t.Log(err)
}

// TestDatabaseKeepsOnlyTheCountsItComputed: an auditor who signs a count
// tree of their own making with raw SQL gets no checkpoint stored, and the
// count tree is counted forward only.
func TestDatabaseKeepsOnlyTheCountsItComputed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 30)
	audrey := db.Login(t, "audrey", "expiryctl_auditor")
	skey, _, _ := audit.GenerateKey("audrey-audit")
	if _, err := audit.SignCheckpoint(ctx, audrey.Pool, "audrey", skey); err != nil {
		t.Fatal(err)
	}
	seedChain(t, db.Pool, 5)
	head, err := audit.ExtendTree(ctx, audrey.Pool)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	made := tlog.RecordHash([]byte("counts of my own making"))
	forged, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\ncounts 65536 %s\n", head.Origin, head.Size, head.Root, made)}, signer)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := audrey.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // refused: nothing to keep
	if _, err := tx.Exec(ctx, `SELECT expiryctl.audit_counts_extend($1)`, head.Size); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `SELECT expiryctl.audit_checkpoint_record('audrey', $1, $2, $3)`, head.Size, head.Root[:], string(forged))
	if r := store.AsRefusal(err); !isRefusal(r, "checkpoint-note") {
		t.Fatalf("a checkpoint of counts the database did not compute: %v, want rule checkpoint-note", err)
	}
	t.Log(err)
	_ = tx.Rollback(ctx)
	_, err = audrey.Pool.Exec(ctx, `SELECT expiryctl.audit_counts_extend(10)`)
	if r := store.AsRefusal(err); !isRefusal(r, "counts-moved") {
		t.Fatalf("counting fewer rows than counted: %v, want rule counts-moved", err)
	}
}

func isRefusal(err error, rule string) bool {
	var r *store.Refusal
	return errors.As(err, &r) && r.Rule == rule
}

// TestCheckpointsBeforeTheCountTree: a trail whose newest checkpoint was
// signed before the count tree still exports evidence, proved row by row
// and said not to be proved complete; the next checkpoint counts every row
// and makes its exports complete.
func TestCheckpointsBeforeTheCountTree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := newTrail(t, 30)
	skey, vkey, _ := audit.GenerateKey("audrey-audit")
	head, err := audit.ExtendTree(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	older, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", head.Origin, head.Size, head.Root)}, signer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `SELECT expiryctl.audit_checkpoint_record('audrey', $1, $2, $3)`, head.Size, head.Root[:], string(older)); err != nil {
		t.Fatal(err)
	}
	res, err := audit.VerifyEvidence(ctx, bytes.NewReader(exportFiltered(t, db, audit.Filter{Target: queueTarget})), "older", vkey)
	if err != nil || res.Complete || !strings.Contains(res.Unproven, "no count tree") || res.Proved != 6 {
		t.Fatalf("evidence under a checkpoint without a count tree: %+v, %v", res, err)
	}
	cp, err := audit.SignCheckpoint(ctx, db.Pool, "audrey", skey)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Counts.IsZero() {
		t.Fatalf("the first checkpoint after the upgrade carries no count tree:\n%s", cp.Note)
	}
	res, err = audit.VerifyEvidence(ctx, bytes.NewReader(exportFiltered(t, db, audit.Filter{Target: queueTarget})), "newer", vkey)
	if err != nil || !res.Complete || res.Count.Count != 6 {
		t.Fatalf("evidence under the first checkpoint with a count tree: %+v, %v", res, err)
	}
}
