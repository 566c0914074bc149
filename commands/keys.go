package commands

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/approval"
)

// NewCmdKeys builds `expiryctl keys`, the approvers' personal keys.
func NewCmdKeys(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys <command>",
		Short: "Approvers' personal signing keys",
		Long: `An approver signs what they approve with a key of their own, so that an
approval is more than a row a database administrator can write: a runner with
a keyring (` + "`replay run --keyring`" + `) publishes only approvals signed by a key of
its keyring, for exactly the request it runs. See docs/governance.md.`,
		Example: `  expiryctl keys generate --out ~/.config/expiryctl/approval.key >> /etc/expiryctl/approvers.keys
  expiryctl replay approve 7 --key ~/.config/expiryctl/approval.key
  expiryctl replay run 7 --keyring /etc/expiryctl/approvers.keys`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(NewCmdKeysGenerate(f, nil))
	return cmd
}

// KeysGenerateOptions holds what `expiryctl keys generate` needs.
type KeysGenerateOptions struct {
	IO   *IOStreams
	Out  string
	Name string
}

// NewCmdKeysGenerate builds `expiryctl keys generate`.
func NewCmdKeysGenerate(f *Factory, runF func(*KeysGenerateOptions) error) *cobra.Command {
	opts := &KeysGenerateOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "generate --out FILE",
		Short: "Make your approval signing key",
		Long: `Make an Ed25519 key that signs your approvals (` + "`replay approve --key`" + `) and
print its verifier key. The key is named after your database login, which is
who the database says approved: --name, else the login --database-url
connects as. The
signing key goes to --out, readable by you alone; an existing file is never
overwritten. Add the verifier key line to the keyring of every runner
(a file or directory given to ` + "`replay run --keyring`" + `), kept where the
database's administrators cannot write.`,
		Example: `  expiryctl keys generate --out ~/.config/expiryctl/approval.key >> /etc/expiryctl/approvers.keys
  expiryctl keys generate --out bob.key --name bob`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Out == "" {
				return flagErrorf("--out is required: the file your signing key is written to")
			}
			if opts.Name == "" {
				// The login the database will see, as pgx reads the URL
				// (a key=value string, PGUSER or the OS user included).
				if cfg, err := pgconn.ParseConfig(f.DatabaseURL()); err == nil {
					opts.Name = cfg.User
				}
			}
			if opts.Name == "" {
				return flagErrorf("--name is required: your database login, which the key is named after")
			}
			if runF != nil {
				return runF(opts)
			}
			return keysGenerateRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the signing key to this new file (mode 0600)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "your database login (default: the login --database-url connects as)")
	return cmd
}

func keysGenerateRun(opts *KeysGenerateOptions) error {
	skey, vkey, err := approval.GenerateKey(opts.Name)
	if err != nil {
		return &FlagError{Err: err}
	}
	if err := writeNewKey(opts.Out, skey, "keys generate"); err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out, vkey)
	fmt.Fprintf(opts.IO.ErrOut, "wrote %s's approval key to %s; the line above is its verifier key, for the runners' keyring\n", opts.Name, opts.Out)
	return nil
}
