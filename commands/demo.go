package commands

import (
	"context"

	"github.com/spf13/cobra"
)

// NewCmdDemo builds `expiryctl demo`.
func NewCmdDemo(f *Factory, runF func(context.Context) error) *cobra.Command {
	return &cobra.Command{Use: "demo", Short: "Stage a realistic incident on the local services", Hidden: true}
}
