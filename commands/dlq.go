package commands

import (
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
)

// NewCmdDLQ builds `expiryctl dlq`, the commands over the dead-letter archive.
func NewCmdDLQ(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq <command>",
		Short: "Capture dead letters and inspect the archive",
		Long: dlqHelp() + `

The archive, not the queue, is what you read: browsing a queue by
get-and-requeue reorders it and bumps redelivery counts.`,
		Example: `  expiryctl dlq ingest --queue reservation-expiry.dlq
  expiryctl dlq summary
  expiryctl dlq list --reason validation
  expiryctl dlq show 42`,
	}
	cmd.AddCommand(NewCmdDLQIngest(f, nil), NewCmdDLQSummary(f, nil), NewCmdDLQList(f, nil), NewCmdDLQShow(f, nil), NewCmdDLQDiscard(f, nil), NewCmdDLQPurge(f, nil))
	return cmd
}

// categoryNames lists the reason categories, for completion.
func categoryNames() []string {
	names := []string{}
	for _, c := range deadletter.Categories() {
		names = append(names, string(c))
	}
	return names
}
