package commands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
)

// AuditKeygenOptions holds what `expiryctl audit keygen` needs.
type AuditKeygenOptions struct {
	IO   *IOStreams
	Out  string
	Name string
}

// NewCmdAuditKeygen builds `expiryctl audit keygen`.
func NewCmdAuditKeygen(f *Factory, runF func(*AuditKeygenOptions) error) *cobra.Command {
	opts := &AuditKeygenOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make a key that signs checkpoints of the audit trail",
		Long: `Make an Ed25519 signing key for ` + "`audit checkpoint`" + ` and print its public
verifier key. The signing key goes to --out, readable by you alone; an existing
file is never overwritten. Give the verifier key to everyone who reviews the
trail: ` + "`audit verify --verifier`" + ` takes it, as text or as a file holding it.

Keep the signing key away from the database's administrators: a checkpoint
proves the trail to someone who does not trust them only if they cannot sign.`,
		Example: `  expiryctl audit keygen --out ~/.config/expiryctl/audit.key > audit.vkey
  expiryctl audit keygen --out audit.key --name payments-audit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return flagErrorf("--out is required: the file the signing key is written to")
			}
			if runF != nil {
				return runF(opts)
			}
			return auditKeygenRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the signing key to this new file (mode 0600)")
	cmd.Flags().StringVar(&opts.Name, "name", "expiryctl-audit", "the key's name, shown in every checkpoint it signs")
	return cmd
}

func auditKeygenRun(opts *AuditKeygenOptions) error {
	skey, vkey, err := audit.GenerateKey(opts.Name)
	if err != nil {
		return &FlagError{Err: err}
	}
	if err := writeNewKey(opts.Out, skey, "keygen"); err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out, vkey)
	fmt.Fprintf(opts.IO.ErrOut, "wrote the signing key to %s; the line above is its verifier key, for `expiryctl audit verify --verifier`\n", opts.Out)
	return nil
}

// writeNewKey writes a signing key to a new file at path, readable by its
// owner alone; an existing file is never overwritten. command names who
// refuses, in the message.
func writeNewKey(path, key, command string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return flagErrorf("--out %s exists: %s never overwrites a key; name a new file", path, command)
	}
	if err != nil {
		return fmt.Errorf("cannot write --out: %w", err)
	}
	if _, err := fmt.Fprintln(f, key); err != nil {
		_ = f.Close()
		return fmt.Errorf("write --out %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write --out %s: %w", path, err)
	}
	return nil
}

// AuditCheckpointOptions holds what `expiryctl audit checkpoint` needs.
type AuditCheckpointOptions struct {
	IO     *IOStreams
	Signer func(context.Context) (service.AuditSigner, error)
	Now    func() time.Time
	Key    string
	Out    string
	// OutDir keeps each checkpoint as OutDir/checkpoint-SIZE.txt.
	OutDir string
	// Every, when set, keeps signing at this interval until interrupted.
	Every time.Duration
}

// NewCmdAuditCheckpoint builds `expiryctl audit checkpoint`.
func NewCmdAuditCheckpoint(f *Factory, runF func(context.Context, *AuditCheckpointOptions) error) *cobra.Command {
	opts := &AuditCheckpointOptions{IO: f.IO, Signer: f.AuditSigner, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "checkpoint --key FILE",
		Short: "Sign the audit trail's current tree head",
		Long: `Bring the trail's Merkle tree up to its last row and sign its head (the trail's
origin, its size and its root hash) with the key from ` + "`audit keygen`" + `. The
signed checkpoint is stored in the database, audited as audit.checkpoint, and
printed (or written to --out). Keep a copy outside the database: ` + "`audit verify\n--checkpoint FILE --verifier KEY`" + ` proves later that the trail still holds every
row the checkpoint covers, unchanged, whatever was recomputed since.

The checkpoint also signs how many rows hold each action, actor and target
(its count tree), so that an export filtered on one of them proves it left
no row out. Neither is taken on the database's word: the signer recomputes
the rows' hashes, the tree and the counts from the newest checkpoint its key
signed before (from the first row when there is none), and signs nothing
when a row is missing, hidden from its login or changed (exit 7).

With --every, it is a long-lived signer: it signs at once, then at each
interval when rows were written since the newest checkpoint, until
interrupted. A failure is reported on stderr and the next interval tries
again; only a first failure stops it. Rows after the newest checkpoint are
protected by the hash chain alone, so run one (docs/runbook.md shows a
systemd unit and a cron line); the AuditCheckpointStale alert fires when the
newest is too old. With --out-dir, each checkpoint is kept as
checkpoint-SIZE.txt in that directory.`,
		Example: `  expiryctl audit checkpoint --key ~/.config/expiryctl/audit.key --out checkpoint-2026-12-01.txt
  expiryctl audit verify --checkpoint checkpoint-2026-12-01.txt --verifier audit.vkey
  expiryctl audit checkpoint --key /etc/expiryctl/audit.key --every 5m --out-dir /var/lib/expiryctl/checkpoints`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Key == "" {
				return flagErrorf("--key is required: the signing key file from `expiryctl audit keygen`")
			}
			if opts.Out != "" && opts.OutDir != "" {
				return flagErrorf("--out and --out-dir both say where the checkpoint goes: pass one")
			}
			if cmd.Flags().Changed("every") && opts.Every < time.Second {
				return flagErrorf("invalid --every %s: use 1s or more, e.g. 5m", opts.Every)
			}
			if opts.Every > 0 && opts.Out != "" {
				return flagErrorf("--every signs many checkpoints, and --out names one file: use --out-dir DIR")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditCheckpointRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "the signing key file written by `expiryctl audit keygen`")
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the signed checkpoint to this file instead of standard output")
	cmd.Flags().StringVar(&opts.OutDir, "out-dir", "", "keep each signed checkpoint in this directory as checkpoint-SIZE.txt")
	cmd.Flags().DurationVar(&opts.Every, "every", 0, "keep signing at this interval until interrupted (e.g. 5m)")
	return cmd
}

func auditCheckpointRun(ctx context.Context, opts *AuditCheckpointOptions) error {
	key, err := os.ReadFile(opts.Key)
	if err != nil {
		return fmt.Errorf("cannot read --key: %w", err)
	}
	signer, err := opts.Signer(ctx)
	if err != nil {
		return err
	}
	cp, err := signer.Sign(ctx, string(key))
	switch {
	case errors.Is(err, audit.ErrEmptyTrail) && opts.Every > 0:
		fmt.Fprintln(opts.IO.ErrOut, "the audit trail has no rows yet: the first checkpoint waits for one")
	case err != nil:
		return err
	default:
		if err := keepCheckpoint(opts, cp); err != nil {
			return err
		}
	}
	if opts.Every == 0 {
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "signing every %s while rows are written, until interrupted\n", opts.Every)
	signer.SignEvery(ctx, string(key), opts.Every, func(cp audit.Checkpoint, err error) {
		if err == nil {
			err = keepCheckpoint(opts, cp)
		}
		if err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "%s: checkpoint failed, trying again in %s: %v\n", opts.Now().UTC().Format(time.RFC3339), opts.Every, err)
		}
	})
	return nil
}

// keepCheckpoint writes a signed checkpoint where the options say, and says
// so on stderr.
func keepCheckpoint(opts *AuditCheckpointOptions, cp audit.Checkpoint) error {
	var err error
	switch {
	case opts.OutDir != "":
		err = writeAtomically(filepath.Join(opts.OutDir, fmt.Sprintf("checkpoint-%d.txt", cp.Size)), cp.Note)
	case opts.Out != "":
		err = writeAtomically(opts.Out, cp.Note)
	default:
		_, err = opts.IO.Out.Write(cp.Note)
	}
	if err != nil {
		return err
	}
	when := ""
	if opts.Every > 0 {
		when = opts.Now().UTC().Format(time.RFC3339) + ": "
	}
	fmt.Fprintf(opts.IO.ErrOut, "%ssigned checkpoint of %d rows by %s, root %s\n", when, cp.Size, cp.SignedBy(), cp.Root)
	return nil
}

// writeAtomically puts data at path complete or not at all.
func writeAtomically(path string, data []byte) error {
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.abort()
		return fmt.Errorf("write --out %s: %w", path, err)
	}
	return f.commit()
}

// readVerifierKey takes --verifier as the key itself or as a file holding it.
func readVerifierKey(value string) (string, error) {
	if _, err := os.Stat(value); err != nil {
		return value, nil
	}
	b, err := os.ReadFile(value)
	if err != nil {
		return "", fmt.Errorf("cannot read --verifier: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
