package commands

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/approval"
	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/reconcile"
)

// AuditVerifyOptions holds what `expiryctl audit verify` needs.
type AuditVerifyOptions struct {
	IO *IOStreams
	// Reviewer verifies the database's chain and Reconciler compares its
	// tables with it; a --file verification calls neither.
	Reviewer   func(context.Context) (service.AuditReviewer, error)
	Reconciler func(context.Context) (service.Reconciler, error)

	From       int64
	AnchorText string
	Anchor     *audit.Anchor
	// File is an export to verify instead of the database; "-" is stdin.
	File      string
	AllowGaps bool
	// Checkpoint is a signed checkpoint file the trail must extend, checked
	// with the Verifier key (the key, or a file holding it).
	Checkpoint string
	Verifier   string
	// Reconcile compares the governance tables with the trail's events.
	Reconcile bool
	// Keyring is the approvers' verifier keys: every signed approval in
	// the --file is checked against it.
	Keyring string
	// RequireComplete fails an evidence --file that is not proved to hold
	// every row its filter matches up to its checkpoint.
	RequireComplete bool
	Output          *outputFormat
}

// NewCmdAuditVerify builds `expiryctl audit verify`.
func NewCmdAuditVerify(f *Factory, runF func(context.Context, *AuditVerifyOptions) error) *cobra.Command {
	opts := &AuditVerifyOptions{IO: f.IO, Reviewer: f.AuditReviewer, Reconciler: f.Reconciler}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the audit chain and report the first row that breaks it",
		Long: `Recompute every row's hash from its fields and check every link, from the
database or, with --file, from an export (no database needed or contacted).

An intact trail prints "verified N rows, head SEQ HASH" and exits 0. A broken
one names the first bad seq and what is wrong there (a changed field, a
missing, inserted or reordered row, a cut tail) and exits non-zero.

The chain alone cannot show rows cut from the end, or a whole chain
rewritten by someone who recomputed every hash. An anchor can: a SEQ:HASH
printed by an earlier export or verify and kept outside the database. With
--anchor, the row with that seq must still exist with that hash.

A signed checkpoint (` + "`audit checkpoint`" + `) proves more than an anchor, to someone
who does not trust the database's administrators: with --checkpoint and
--verifier, the tree of today's rows, computed here from the rows alone, must
contain the checkpointed tree unchanged. A cut tail, or any row before the
checkpoint rewritten, inserted or removed, even with every hash recomputed,
fails, naming the first row that differs where the database can still tell.

An evidence --file (` + "`audit export -o evidence`" + `) is checked with --verifier, the
key its checkpoint must be signed by; with --checkpoint as well, its
checkpoint must extend yours: an older one is a rollback, and a newer one
must carry the proof that it extends yours (or, for a whole-trail file, the
rows that show it). A checkpoint that does not verify, against either key,
fails the verification (exit 7); a key that does not parse is a usage error.

An evidence file is complete when it holds every row its filter matches up
to its checkpoint: a whole-trail file, or a file filtered on exactly one of
--target, --actor and --action, whose checkpoint signs how many rows hold
each value (its count tree). A file that holds fewer fails (exit 7); one
whose completeness nothing proves (another filter, an older checkpoint)
says so, and with --complete fails too.

With --reconcile, the trail's governance events (requests, reviews, runs,
item outcomes, policy changes) are replayed and compared with the tables
they changed: a state with no event behind it, such as a request approved
with no approval row, an item confirmed with no run that recorded it, or a
policy value nobody proposed and approved, is reported with its table, key
and column (exit 7).

The database verification is recorded as an audit.verify row with its result;
a --file verification touches no database and so records nothing.`,
		Example: `  expiryctl audit verify
  expiryctl audit verify --anchor 4812:3f9a…
  expiryctl audit verify --from 4000
  expiryctl audit verify --checkpoint checkpoint-2026-12-01.txt --verifier audit.vkey
  expiryctl audit verify --reconcile
  expiryctl audit verify --file trail.ndjson --anchor 4812:3f9a…
  expiryctl audit verify --file november.csv --allow-gaps
  expiryctl audit verify --file request-7.evidence --verifier audit.vkey --checkpoint mine.txt
  expiryctl audit verify --file request-7.evidence --verifier audit.vkey --complete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.From < 0 {
				return flagErrorf("invalid --from %d: use a seq, 1 or more", opts.From)
			}
			if opts.AnchorText != "" {
				a, err := audit.ParseAnchor(opts.AnchorText)
				if err != nil {
					return &FlagError{Err: err}
				}
				opts.Anchor = &a
			}
			if opts.AllowGaps && opts.File == "" {
				return flagErrorf("--allow-gaps is for --file (a filtered export); the database's chain never has gaps")
			}
			if opts.Checkpoint != "" && opts.Verifier == "" {
				return flagErrorf("--checkpoint needs --verifier: the key it must be signed by")
			}
			if opts.Checkpoint != "" && (opts.From > 1 || opts.Anchor != nil) {
				return flagErrorf("--checkpoint verifies the whole trail, or an evidence --file, against your checkpoint: leave out --from and --anchor")
			}
			if opts.Keyring != "" && (opts.File == "" || opts.File == "-") {
				return flagErrorf("--keyring checks the signed approvals of an export: pass --file FILE (not stdin: it is read twice)")
			}
			if opts.Reconcile && opts.File != "" {
				return flagErrorf("--reconcile compares the database's tables with its trail: leave out --file")
			}
			if opts.RequireComplete && (opts.File == "" || opts.Verifier == "") {
				return flagErrorf("--complete is for an evidence --file, checked with --verifier")
			}
			if opts.Verifier != "" && opts.Checkpoint == "" && opts.File == "" {
				return flagErrorf("--verifier checks a --checkpoint, or the checkpoint an evidence --file carries")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditVerifyRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&opts.From, "from", 0, "start at this seq (default: the first row); row FROM-1 provides the link")
	fl.StringVar(&opts.AnchorText, "anchor", "", "SEQ:HASH that must still be in the chain (from an earlier export or verify)")
	fl.StringVar(&opts.File, "file", "", "verify this export (ndjson, json or csv; - for stdin) instead of the database")
	fl.BoolVar(&opts.AllowGaps, "allow-gaps", false, "with --file: accept the jumps in seq of a filtered export")
	fl.StringVar(&opts.Keyring, "keyring", "", "with --file: check every signed approval against these approvers' verifier keys (a file or directory)")
	fl.BoolVar(&opts.Reconcile, "reconcile", false, "also compare requests, items and the policy with the trail's governance events")
	fl.StringVar(&opts.Checkpoint, "checkpoint", "", "a signed checkpoint file (from `audit checkpoint`) the trail, or an evidence --file, must extend")
	fl.StringVar(&opts.Verifier, "verifier", "", "with --checkpoint or an evidence --file: the verifier key the checkpoint must be signed by, or a file holding it")
	fl.BoolVar(&opts.RequireComplete, "complete", false, "with an evidence --file: fail unless it is proved to hold every row its filter matches up to its checkpoint")
	opts.Output = addOutputFlag(cmd, "text", "json")
	return cmd
}

// verifyReport is `audit verify -o json`.
type verifyReport struct {
	Source   string `json:"source"`
	Rows     int64  `json:"rows"`
	From     int64  `json:"from"`
	HeadSeq  int64  `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	Gaps     int64  `json:"gaps"`
}

func auditVerifyRun(ctx context.Context, opts *AuditVerifyOptions) error {
	if opts.File != "" {
		return auditVerifyFile(ctx, opts)
	}
	if opts.Checkpoint != "" {
		if err := auditVerifyCheckpoint(ctx, opts); err != nil {
			return err
		}
		return reconcileIfAsked(ctx, opts)
	}
	reviewer, err := opts.Reviewer(ctx)
	if err != nil {
		return err
	}
	res, verr := reviewer.Verify(ctx, opts.From, opts.Anchor)
	var recordErr *audit.RecordError
	if errors.As(verr, &recordErr) {
		return recordErr
	}
	if verr != nil {
		return explainChainError(opts.IO, verr, false)
	}
	if err := printVerified(opts, "database", res); err != nil {
		return err
	}
	return reconcileIfAsked(ctx, opts)
}

// reconcileIfAsked runs --reconcile after the chain verified, and lists
// what it found.
func reconcileIfAsked(ctx context.Context, opts *AuditVerifyOptions) error {
	if !opts.Reconcile {
		return nil
	}
	reconciler, err := opts.Reconciler(ctx)
	if err != nil {
		return err
	}
	rep, err := reconciler.Reconcile(ctx)
	var mismatch *reconcile.MismatchError
	if errors.As(err, &mismatch) {
		t := newTable(opts.IO, "TABLE", "KEY", "COLUMN", "FINDING").truncatable("FINDING")
		for _, f := range mismatch.Findings {
			t.addRow(f.Table, f.Key, f.Column, f.Detail)
		}
		if ferr := t.render(); ferr != nil {
			return ferr
		}
		fmt.Fprintf(opts.IO.ErrOut, "%d governance states have no event behind them: they were written around the rules; "+
			"keep the evidence and report it to whoever governs this database\n", len(mismatch.Findings))
		return err
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "reconciled %s and the policy with %s: every state has an event behind it\n",
		phrase.Count(rep.Requests, "request", "requests"), phrase.Count(rep.Events, "governance event", "governance events"))
	return err
}

func auditVerifyCheckpoint(ctx context.Context, opts *AuditVerifyOptions) error {
	msg, err := os.ReadFile(opts.Checkpoint)
	if err != nil {
		return fmt.Errorf("cannot read --checkpoint: %w", err)
	}
	vkey, err := readVerifierKey(opts.Verifier)
	if err != nil {
		return err
	}
	cp, err := openHeldCheckpoint(opts.Checkpoint, msg, vkey)
	if err != nil {
		return err
	}
	reviewer, err := opts.Reviewer(ctx)
	if err != nil {
		return err
	}
	res, cons, verr := reviewer.VerifyCheckpoint(ctx, cp)
	var recordErr *audit.RecordError
	if errors.As(verr, &recordErr) {
		return recordErr
	}
	if verr != nil {
		return explainChainError(opts.IO, verr, false)
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, checkpointReport{verifyReport: verifyReport{Source: "database", Rows: res.Rows, From: res.From,
			HeadSeq: res.Head.Seq, HeadHash: res.Head.Hash.String()}, CheckpointSize: cp.Size, CheckpointSigner: cp.Signer,
			CheckpointSignerKeyHash: fmt.Sprintf("%08x", cp.SignerHash),
			TreeSize:                cons.Size, TreeRoot: cons.Root.String()})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "verified %d rows, head %d %s; they extend the checkpoint of %d rows signed by %s; tree root now %s\n",
		res.Rows, res.Head.Seq, res.Head.Hash, cp.Size, cp.SignedBy(), cons.Root)
	return err
}

// openHeldCheckpoint opens the checkpoint a reviewer holds: one that does
// not verify against their key fails the verification (exit 7).
func openHeldCheckpoint(path string, msg []byte, vkey string) (audit.Checkpoint, error) {
	cp, err := audit.OpenCheckpoint(msg, vkey)
	var refused *audit.ChainError
	if errors.As(err, &refused) {
		refused.Source = "--checkpoint " + path
	}
	return cp, err
}

// checkpointReport is `audit verify --checkpoint -o json`.
type checkpointReport struct {
	verifyReport
	CheckpointSize   int64  `json:"checkpoint_tree_size"`
	CheckpointSigner string `json:"checkpoint_signer"`
	// CheckpointSignerKeyHash tells apart two keys of the same name.
	CheckpointSignerKeyHash string `json:"checkpoint_signer_key_hash"`
	TreeSize                int64  `json:"tree_size"`
	TreeRoot                string `json:"tree_root"`
}

func auditVerifyFile(ctx context.Context, opts *AuditVerifyOptions) error {
	var r io.Reader = opts.IO.In
	name := "stdin"
	if opts.File != "-" {
		f, err := os.Open(opts.File)
		if err != nil {
			return fmt.Errorf("cannot read --file: %w", err)
		}
		defer f.Close()
		r, name = f, opts.File
	}
	br := bufio.NewReaderSize(r, 1<<20)
	r = br
	if audit.IsEvidence(br) {
		if err := auditVerifyEvidence(ctx, opts, br, name); err != nil {
			return err
		}
		return verifyApprovals(ctx, opts, name)
	}
	if opts.Keyring != "" {
		if format, _ := audit.SniffFormat(br); format != audit.NDJSON {
			return flagErrorf("--keyring reads an ndjson or evidence export; --file %s is %s", name, format)
		}
	}
	if opts.Verifier != "" || opts.Checkpoint != "" {
		return flagErrorf("--file %s is not an evidence export (it carries no checkpoint for --verifier or --checkpoint to check): make one with `audit export -o evidence` once the trail has a checkpoint", name)
	}
	res, err := audit.VerifyFile(ctx, r, name, audit.VerifyOptions{From: opts.From, Anchor: opts.Anchor, AllowGaps: opts.AllowGaps})
	if err != nil {
		return explainChainError(opts.IO, err, true)
	}
	if err := printVerified(opts, name, res); err != nil {
		return err
	}
	return verifyApprovals(ctx, opts, name)
}

// verifyApprovals checks, with --keyring, every signed approval of the
// export at path, once its rows verified.
func verifyApprovals(ctx context.Context, opts *AuditVerifyOptions, path string) error {
	if opts.Keyring == "" {
		return nil
	}
	keyring, err := approval.LoadKeyring(opts.Keyring)
	if err != nil {
		return &FlagError{Err: fmt.Errorf("--keyring: %w", err)}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read --file: %w", err)
	}
	defer f.Close()
	res, err := audit.VerifyApprovals(ctx, f, path, func(signed []byte) (int64, string, error) {
		s, err := keyring.Open(signed)
		return s.Request, s.Approver, err
	})
	if err != nil {
		return explainChainError(opts.IO, err, true)
	}
	fmt.Fprintf(opts.IO.ErrOut, "%d signed approvals verified against %s; %d approvals unsigned\n", res.Signed, opts.Keyring, res.Unsigned)
	return nil
}

func auditVerifyEvidence(ctx context.Context, opts *AuditVerifyOptions, r io.Reader, name string) error {
	if opts.Verifier == "" {
		return flagErrorf("--file %s is an evidence export: pass --verifier KEY, the key its checkpoint must be signed by", name)
	}
	if opts.Anchor != nil || opts.From > 1 || opts.AllowGaps {
		return flagErrorf("an evidence export is checked by its proofs: leave out --anchor, --from and --allow-gaps")
	}
	vkey, err := readVerifierKey(opts.Verifier)
	if err != nil {
		return err
	}
	var res audit.EvidenceResult
	if opts.Checkpoint != "" {
		msg, err := os.ReadFile(opts.Checkpoint)
		if err != nil {
			return fmt.Errorf("cannot read --checkpoint: %w", err)
		}
		held, err := openHeldCheckpoint(opts.Checkpoint, msg, vkey)
		if err != nil {
			return err
		}
		res, err = audit.VerifyEvidenceExtends(ctx, r, name, vkey, held)
		if err != nil {
			return explainChainError(opts.IO, err, true)
		}
	} else if res, err = audit.VerifyEvidence(ctx, r, name, vkey); err != nil {
		return explainChainError(opts.IO, err, true)
	}
	if opts.RequireComplete && !res.Complete {
		return explainChainError(opts.IO, &audit.ChainError{Problem: audit.Incomplete, Source: name, Detail: "--complete: " + res.Unproven}, true)
	}
	if opts.Output.value == "json" {
		report := map[string]any{"source": name, "rows": res.Rows, "proved": res.Proved,
			"checkpoint_tree_size": res.Checkpoint.Size, "checkpoint_signer": res.Checkpoint.Signer,
			"checkpoint_signer_key_hash": fmt.Sprintf("%08x", res.Checkpoint.SignerHash),
			"consistent_with_sizes":      append([]int64{}, res.Consistent...), "extends_checkpoint_size": res.Extends,
			"complete": res.Complete, "count": nil}
		if res.Count != nil {
			report["count"] = map[string]any{"field": res.Count.Field, "value": res.Count.Value, "rows": res.Count.Count, "newest_seq": res.Count.Newest}
		}
		if !res.Complete {
			report["unproven"] = res.Unproven
		}
		return writeJSON(opts.IO.Out, report)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "verified %d rows of %s: %d proved in the checkpoint of %d rows signed by %s, %d newer than it (unproven)\n",
		res.Rows, name, res.Proved, res.Checkpoint.Size, res.Checkpoint.SignedBy(), res.Rows-res.Proved)
	if err == nil {
		_, err = fmt.Fprintln(opts.IO.Out, completeness(res))
	}
	if err == nil && opts.Checkpoint != "" {
		_, err = fmt.Fprintf(opts.IO.Out, "its checkpoint extends yours of %d rows (%s)\n", res.Extends, opts.Checkpoint)
	}
	return err
}

// completeness says whether an evidence file was proved to hold every row
// its filter matches.
func completeness(res audit.EvidenceResult) string {
	switch c := res.Count; {
	case !res.Complete:
		return "not proved complete: " + res.Unproven
	case c == nil:
		return fmt.Sprintf("complete: every row from seq 1 through the checkpoint's %d", res.Checkpoint.Size)
	case c.Count == 0:
		return fmt.Sprintf("complete: the checkpoint counts no row of %s %q through seq %d, and the file has none", c.Field, c.Value, res.Checkpoint.Size)
	}
	return fmt.Sprintf("complete: the checkpoint counts %s of %s %q through seq %d, the newest at seq %d, and the file proves every one",
		phrase.Count(res.Count.Count, "row", "rows"), res.Count.Field, res.Count.Value, res.Checkpoint.Size, res.Count.Newest)
}

// explainChainError tells a person what to do about a broken chain; the
// error itself is printed by Main.
func explainChainError(streams *IOStreams, err error, file bool) error {
	var chainErr *audit.ChainError
	switch {
	case !errors.As(err, &chainErr):
	case file:
		fmt.Fprintf(streams.ErrOut, "this file is not an unchanged export (from seq %d on): do not rely on it; "+
			"check the database with `expiryctl audit verify` and export again\n", chainErr.Seq)
	default:
		fmt.Fprintf(streams.ErrOut, "the audit trail was changed outside expiryctl at or after seq %d: keep the evidence "+
			"(`expiryctl audit export --out FILE`), compare it with an earlier export, and report it to whoever governs this database\n",
			chainErr.Seq)
	}
	return err
}

func printVerified(opts *AuditVerifyOptions, source string, res audit.Result) error {
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, verifyReport{Source: source, Rows: res.Rows, From: res.From, HeadSeq: res.Head.Seq,
			HeadHash: res.Head.Hash.String(), Gaps: res.Gaps})
	}
	if res.Rows == 0 {
		_, err := fmt.Fprintf(opts.IO.Out, "verified 0 rows: %s has none\n", source)
		return err
	}
	if _, err := fmt.Fprintf(opts.IO.Out, "verified %s, head %d %s\n", phrase.Count(res.Rows, "row", "rows"), res.Head.Seq, res.Head.Hash); err != nil {
		return err
	}
	if res.Gaps > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "%d gaps allowed: rows around them were checked one by one, not as a chain\n", res.Gaps)
	}
	return nil
}
