package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
)

// AuditExportOptions holds what `expiryctl audit export` needs.
type AuditExportOptions struct {
	IO       *IOStreams
	Exporter func(context.Context) (service.AuditExporter, error)
	Now      func() time.Time

	FormatText string
	Format     audit.Format
	Since      string
	Until      string
	Filter     audit.Filter
	// Out is the file to write; "" writes to stdout.
	Out string
	// FromCheckpoint is a checkpoint file the reviewer holds: the evidence
	// proves its own checkpoint extends it.
	FromCheckpoint string
	from           []int64
	// formatChosen is whether --format was given: a filtered export is
	// evidence otherwise, when the trail has a checkpoint.
	formatChosen bool
}

// NewCmdAuditExport builds `expiryctl audit export`.
func NewCmdAuditExport(f *Factory, runF func(context.Context, *AuditExportOptions) error) *cobra.Command {
	opts := &AuditExportOptions{IO: f.IO, Exporter: f.AuditExporter, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export the audit trail, oldest first, for offline verification",
		Long: `Export audit rows oldest first, with their seq and hashes, as ndjson (one
JSON object per line), json (one array) or csv. Any export can be checked
later, without a database, with ` + "`expiryctl audit verify --file`" + `.

The export is recorded first, as an audit.export row, and ends with that row:
an unfiltered export is the whole trail up to and including the record of its
own making. At the end it prints the chain head it covers on stderr:

  exported 4812 rows; chain head 4812 3f9a…

Keep that SEQ and HASH apart from the file (a ticket, a signed note): with
it, ` + "`audit verify --file F --anchor SEQ:HASH`" + ` proves the file unchanged, and
` + "`audit verify --anchor SEQ:HASH`" + ` proves the database unchanged up to it.

With --out the file appears complete or not at all: it is written to a
temporary file in the same directory, synced, then renamed into place.
Filters make an export that is not a contiguous chain. Once the trail has a
signed checkpoint (` + "`audit checkpoint`" + `), a filtered export is written as evidence
unless --format says otherwise: the matching rows, each with its inclusion
proof in the newest checkpoint, which the file carries too. A reviewer checks
it alone, with no database: ` + "`audit verify --file F --verifier KEY`" + `.
The header also proves that checkpoint extends the stored ones before it,
and, with --from-checkpoint, one the reviewer holds. An unfiltered evidence
export holds every row and no proofs: its verifier computes the tree. See
docs/audit.md. Here --actor filters by actor; name yourself with EXPIRYCTL_ACTOR.`,
		Example: `  expiryctl audit export --out trail.ndjson
  expiryctl audit export -o csv --since 2026-11-01 --until 2026-12-01 --out november.csv
  expiryctl audit export --action replay.approve | jq -r .actor
  expiryctl audit export --target replay_request:7 --out request-7.evidence
  expiryctl audit verify --file request-7.evidence --verifier audit.vkey
  expiryctl audit export --target replay_request:7 --from-checkpoint mine.txt --out request-7.evidence`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := audit.ParseFormat(opts.FormatText)
			if opts.FormatText == string(audit.Evidence) {
				format, err = audit.Evidence, nil
			}
			if err != nil {
				return &FlagError{Err: fmt.Errorf("%w, or evidence", err)}
			}
			opts.Format = format
			opts.formatChosen = cmd.Flags().Changed("output") || cmd.Flags().Changed("format")
			if err := resolveAuditTimes(opts.Since, opts.Until, opts.Now, &opts.Filter); err != nil {
				return err
			}
			if opts.FromCheckpoint != "" {
				if opts.formatChosen && opts.Format != audit.Evidence {
					return flagErrorf("--from-checkpoint proves an evidence export's checkpoint extends yours: it needs -o evidence")
				}
				msg, err := os.ReadFile(opts.FromCheckpoint)
				if err != nil {
					return flagErrorf("cannot read --from-checkpoint: %v", err)
				}
				head, err := audit.ReadCheckpoint(msg)
				if err != nil {
					return flagErrorf("--from-checkpoint %s: %v", opts.FromCheckpoint, err)
				}
				opts.Format, opts.formatChosen, opts.from = audit.Evidence, true, []int64{head.Size}
			}
			if opts.Out == "" && opts.IO.StdoutTTY {
				return flagErrorf("audit export writes a file for programs, not a terminal: pass --out FILE or redirect stdout (`expiryctl audit list` is for reading)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return auditExportRun(cmd.Context(), opts)
		},
	}
	addAuditFilterFlags(cmd, &opts.Since, &opts.Until, &opts.Filter)
	fl := cmd.Flags()
	fl.StringVarP(&opts.FormatText, "output", "o", string(audit.NDJSON), "output format: ndjson, json, csv, or evidence (rows with inclusion proofs; the default for a filtered export once a checkpoint exists)")
	// --format was this command's name for -o before every command said -o.
	fl.StringVar(&opts.FormatText, "format", string(audit.NDJSON), "the same as --output")
	_ = fl.MarkDeprecated("format", "use -o/--output")
	fl.StringVar(&opts.Out, "out", "", "write to this file, atomically (default: stdout)")
	fl.StringVar(&opts.FromCheckpoint, "from-checkpoint", "", "a checkpoint file you hold: the evidence proves its checkpoint extends it (implies -o evidence)")
	formats := []string{}
	for _, f := range append(audit.Formats(), audit.Evidence) {
		formats = append(formats, string(f))
	}
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func auditExportRun(ctx context.Context, opts *AuditExportOptions) error {
	exporter, err := opts.Exporter(ctx)
	if err != nil {
		return err
	}
	if !opts.formatChosen {
		if opts.Format, err = exporter.DefaultFormat(ctx, opts.Filter); err != nil {
			return err
		}
	}
	var (
		w    io.Writer = opts.IO.Out
		file *atomicFile
		dest = "stdout"
	)
	if opts.Out != "" {
		// The file is opened before the audit row is written, so that an
		// unwritable --out is refused without a record of an export that
		// never started.
		if file, err = createAtomic(opts.Out); err != nil {
			return err
		}
		defer file.abort()
		w = file
		if dest, err = filepath.Abs(opts.Out); err != nil {
			dest = opts.Out
		}
	}

	// The export is recorded before it starts: a reviewer learns of every
	// export, also one that is killed half-way, and the export ends with
	// its own row (ThroughSeq), so the file shows it was recorded.
	details := map[string]any{"format": opts.Format, "filter": opts.Filter, "out": dest}
	own, err := exporter.Append(ctx, audit.Entry{Action: "audit.export", Details: details})
	if err != nil {
		return err
	}
	filter := opts.Filter
	filter.ThroughSeq = own.Seq

	var res audit.ExportResult
	var evidence audit.EvidenceResult
	if opts.Format == audit.Evidence {
		evidence, err = exporter.ExportEvidence(ctx, w, filter, opts.from...)
		res.Rows = evidence.Rows
	} else {
		res, err = exporter.Export(ctx, w, opts.Format, filter)
	}
	if err == nil && file != nil {
		err = file.commit()
	}
	if err != nil {
		details["error"] = audit.ErrorText(err)
		details["rows_written"] = res.Rows
		details["export_seq"] = own.Seq
		// A cancelled context must not stop the failure from being recorded.
		_ = exporter.Record(context.WithoutCancel(ctx), audit.Entry{Action: "audit.export",
			Details: details, Outcome: audit.Failed})
		return err
	}

	if opts.Format == audit.Evidence {
		fmt.Fprintf(opts.IO.ErrOut, "exported %d rows as evidence: %d with inclusion proofs in the checkpoint of %d rows, %d newer than it; "+
			"`expiryctl audit verify --file %s --verifier KEY` checks it with no database\n",
			evidence.Rows, evidence.Proved, evidence.Checkpoint.Size, evidence.Rows-evidence.Proved, orFILE(opts.Out))
		return nil
	}
	if res.Rows == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "exported 0 rows: nothing matches")
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "exported %s; chain head %d %s\n", phrase.Count(res.Rows, "row", "rows"), res.Head.Seq, res.Head.Hash)
	if opts.Filter.IsZero() {
		fmt.Fprintf(opts.IO.ErrOut, "keep the anchor %s apart from the file: `expiryctl audit verify --file %s --anchor %s` checks the file with it\n",
			res.Head, orFILE(opts.Out), res.Head)
	} else {
		fmt.Fprintln(opts.IO.ErrOut, "filtered: the rows in between are left out, so verify it with --allow-gaps (each row is checked on its own)")
	}
	return nil
}

// orFILE names the output file in a hint, or FILE for stdout.
func orFILE(out string) string {
	if out == "" {
		return "FILE"
	}
	return out
}
