package commands

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
)

// AuditConsistencyOptions holds what `expiryctl audit consistency` needs.
type AuditConsistencyOptions struct {
	IO       *IOStreams
	Reviewer func(context.Context) (service.AuditReviewer, error)

	Older, Newer string
	Verifier     string
	// Evidence is an evidence export whose header carries the proof, so
	// that no database is contacted.
	Evidence string
	Output   *outputFormat
}

// NewCmdAuditConsistency builds `expiryctl audit consistency`.
func NewCmdAuditConsistency(f *Factory, runF func(context.Context, *AuditConsistencyOptions) error) *cobra.Command {
	opts := &AuditConsistencyOptions{IO: f.IO, Reviewer: f.AuditReviewer}
	cmd := &cobra.Command{
		Use:   "consistency OLDER NEWER",
		Short: "Check that a newer signed checkpoint extends an older one",
		Long: `Check two signed checkpoints (from ` + "`audit checkpoint`" + `) against each other:
both signed by the --verifier key, of the same trail, and the newer's tree
holding the older's unchanged as its first rows. A trail rewritten between
them, even with every hash recomputed, fails, as does a newer checkpoint that
covers fewer rows (a rollback) or the same rows with another root (a fork).

The proof that one tree extends the other is read from the database's stored
tree, which is not trusted for it: the proof is checked against the two
signed roots. With --evidence, it is read from an evidence export whose own
checkpoint is NEWER, and no database is contacted.

It exits 0 when NEWER extends OLDER and 7 when it does not or a checkpoint
does not verify. A database check is recorded as an audit.verify row.`,
		Example: `  expiryctl audit consistency checkpoint-11-01.txt checkpoint-12-01.txt --verifier audit.vkey
  expiryctl audit consistency mine.txt theirs.txt --verifier audit.vkey --evidence request-7.evidence`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Older, opts.Newer = args[0], args[1]
			if opts.Verifier == "" {
				return flagErrorf("--verifier is required: the key both checkpoints must be signed by")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditConsistencyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Verifier, "verifier", "", "the verifier key both checkpoints must be signed by, or a file holding it")
	cmd.Flags().StringVar(&opts.Evidence, "evidence", "", "read the proof from this evidence export (its checkpoint is NEWER) instead of the database")
	opts.Output = addOutputFlag(cmd, "text", "json")
	return cmd
}

func auditConsistencyRun(ctx context.Context, opts *AuditConsistencyOptions) error {
	vkey, err := readVerifierKey(opts.Verifier)
	if err != nil {
		return err
	}
	open := func(path string) (audit.Checkpoint, error) {
		msg, err := os.ReadFile(path)
		if err != nil {
			return audit.Checkpoint{}, flagErrorf("cannot read %s: %v", path, err)
		}
		return openHeldCheckpoint(path, msg, vkey)
	}
	older, err := open(opts.Older)
	if err != nil {
		return err
	}
	newer, err := open(opts.Newer)
	if err != nil {
		return err
	}
	source := "the database's stored tree"
	if opts.Evidence != "" {
		source = opts.Evidence
		f, err := os.Open(opts.Evidence)
		if err != nil {
			return flagErrorf("cannot read --evidence: %v", err)
		}
		err = audit.CheckConsistencyByEvidence(f, opts.Evidence, older, newer, vkey)
		_ = f.Close()
		if errors.Is(err, audit.ErrEvidenceOfAnotherCheckpoint) {
			return &FlagError{Err: fmt.Errorf("--evidence %s: %w", opts.Evidence, err)}
		}
		if err != nil {
			return err
		}
	} else {
		reviewer, err := opts.Reviewer(ctx)
		if err != nil {
			return err
		}
		if err := reviewer.Consistency(ctx, older, newer); err != nil {
			return err
		}
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, map[string]any{"consistent": true, "proof_from": source,
			"older": map[string]any{"tree_size": older.Size, "root_hash": older.Root.String(), "signer": older.Signer},
			"newer": map[string]any{"tree_size": newer.Size, "root_hash": newer.Root.String(), "signer": newer.Signer}})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "the checkpoint of %d rows (%s) extends the checkpoint of %d rows (%s), signed by %s; proof from %s\n",
		newer.Size, opts.Newer, older.Size, opts.Older, newer.SignedBy(), source)
	return err
}
