package commands

import (
	"context"

	"github.com/spf13/cobra"
)

// NewCmdWorker builds `expiryctl worker`.
func NewCmdWorker(f *Factory, runF func(context.Context) error) *cobra.Command {
	return &cobra.Command{Use: "worker", Short: "Run the reference expiry worker", Hidden: true}
}
