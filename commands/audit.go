package commands

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/audit"
)

// NewCmdAudit builds `expiryctl audit`, the commands over the audit trail:
// list it, export it, and verify that nobody changed it.
func NewCmdAudit(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit <command>",
		Short: "List, export and verify the audit trail",
		Long: `Every expiryctl command, reads included, leaves a row in the audit trail.
The trail is append-only (the database refuses UPDATE, DELETE and TRUNCATE)
and hash-chained: each row's hash covers its fields and the hash of the row
before it, so a row that is changed, removed, inserted or moved breaks the
chain at that row. ` + "`audit verify`" + ` recomputes the chain, from the database
or from an export, without trusting anything the database computed.

docs/audit.md specifies the hash so that anyone can write their own verifier.`,
		Example: `  expiryctl audit list --since 2h --action dlq.show
  expiryctl audit export --out trail.ndjson
  expiryctl audit verify --anchor 4812:3f9a…
  expiryctl audit verify --file trail.ndjson --anchor 4812:3f9a…
  expiryctl audit keygen --out audit.key > audit.vkey
  expiryctl audit checkpoint --key audit.key --out checkpoint.txt
  expiryctl audit verify --checkpoint checkpoint.txt --verifier audit.vkey`,
	}
	cmd.AddCommand(NewCmdAuditList(f, nil), NewCmdAuditExport(f, nil), NewCmdAuditVerify(f, nil),
		NewCmdAuditKeygen(f, nil), NewCmdAuditCheckpoint(f, nil), NewCmdAuditConsistency(f, nil))
	return cmd
}

// addAuditFilterFlags registers the filter flags list and export share.
//
// --actor here filters; it shadows the global --actor (who you are) for
// these commands, so name yourself with EXPIRYCTL_ACTOR when you need to.
func addAuditFilterFlags(cmd *cobra.Command, since, until *string, f *audit.Filter) {
	fl := cmd.Flags()
	fl.StringVar(since, "since", "", "only rows written at or after this time (RFC 3339, date, or duration ago)")
	fl.StringVar(until, "until", "", "only rows written before this time")
	fl.StringVar(&f.Actor, "actor", "", "only rows of this actor (here a filter: name yourself with EXPIRYCTL_ACTOR)")
	fl.StringVar(&f.Action, "action", "", "only rows of this action, e.g. dlq.show")
	fl.StringVar(&f.Target, "target", "", "only rows about this target, e.g. dead_letter:42")
}

// resolveAuditTimes parses --since and --until into f.
func resolveAuditTimes(since, until string, now func() time.Time, f *audit.Filter) error {
	var err error
	if since != "" {
		if f.Since, err = parseTimeFlag("since", since, now()); err != nil {
			return err
		}
	}
	if until != "" {
		if f.Until, err = parseTimeFlag("until", until, now()); err != nil {
			return err
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return flagErrorf("--since %s is not before --until %s: nothing can match", since, until)
	}
	return nil
}
