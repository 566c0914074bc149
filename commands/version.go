package commands

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/release"
)

// Version is set by a release build with -ldflags "-X
// github.com/expiryctl/expiryctl/commands.Version=v1.2.0"; when it is not,
// the version comes from the binary's build information.
var Version = "dev"

// Commit, CommitTime and Modified are set by a release build beside
// Version (scripts/release.sh), for when Go cannot stamp the VCS
// information itself (release.Linked says when).
var (
	// Commit is the commit a release build was made from.
	Commit string
	// CommitTime is its time, RFC 3339 in UTC.
	CommitTime string
	// Modified is "true" when the work tree had changes.
	Modified string
)

// readBuildVersion reads the running binary's build.
func readBuildVersion() release.Build {
	return release.Running(release.Linked{Version: Version, Commit: Commit, CommitTime: CommitTime, Modified: Modified})
}

// VersionOptions holds what `expiryctl version` needs.
type VersionOptions struct {
	IO  *IOStreams
	Now func() time.Time

	Output *outputFormat
	// VerifyRelease is a directory of downloaded release files to check
	// against their SHA256SUMS and its signature; Signers the
	// allowed_signers (or public key) file the signature must match.
	VerifyRelease string
	Signers       string
}

// NewCmdVersion builds `expiryctl version`.
func NewCmdVersion(f *Factory) *cobra.Command {
	opts := &VersionOptions{IO: f.IO, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print expiryctl's version and the commit it was built from, or verify a release",
		Long: `Print expiryctl's version, the commit it was built from, its build date (the
commit's time: builds are reproducible, so the date is the commit's, not the
build machine's clock), whether the work tree was modified and the Go release
that built it, from the binary's own build information. --version prints the
same line. A binary installed with ` + "`go install …@VERSION`" + ` from a tag
carries no commit: the tag names it.

--verify-release DIR checks a downloaded release before it is trusted: every
archive and package in DIR must have the SHA-256 that DIR/SHA256SUMS gives,
and DIR/SHA256SUMS.sig must be an SSH signature of SHA256SUMS (namespace
expiryctl-release) by a key that --signers accepts now: an allowed_signers
file (with its namespaces, valid-after and valid-before) or a public key.
Take --signers from the repository, never from the download itself. The first
file that differs is named and the command exits 7. docs/install.md shows the
same check with ssh-keygen alone.`,
		Example: `  expiryctl version
  expiryctl version -o json
  expiryctl version --verify-release ~/Downloads/expiryctl-v1.2.0 --signers allowed_signers`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.VerifyRelease != "" || opts.Signers != "" {
				return verifyReleaseRun(opts)
			}
			return versionRun(opts.IO.Out, opts.Output.value, readBuildVersion())
		},
	}
	opts.Output = addOutputFlag(cmd, "text", "json")
	fl := cmd.Flags()
	fl.StringVar(&opts.VerifyRelease, "verify-release", "", "verify the release files in this directory against its SHA256SUMS and SHA256SUMS.sig")
	fl.StringVar(&opts.Signers, "signers", "", "the allowed_signers file (or ssh-ed25519 public key) that --verify-release accepts signatures from")
	return cmd
}

func versionRun(w io.Writer, format string, v release.Build) error {
	if format == "json" {
		return writeJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "expiryctl %s\n", v)
	return err
}

func verifyReleaseRun(opts *VersionOptions) error {
	if opts.VerifyRelease == "" || opts.Signers == "" {
		return flagErrorf("--verify-release DIR and --signers FILE go together: --signers is the allowed_signers file from the repository (packaging/allowed_signers), not one that came with the download")
	}
	data, err := os.ReadFile(opts.Signers)
	if err != nil {
		return flagErrorf("--signers: %v", err)
	}
	signers, err := release.ParseSigners(opts.Signers, data)
	if err != nil {
		return &FlagError{Err: err}
	}
	rep, err := release.Verify(opts.VerifyRelease, signers, opts.Now())
	if err != nil {
		return fmt.Errorf("release in %s does not verify: %w", opts.VerifyRelease, err)
	}
	if opts.Output.value == "json" {
		return writeJSON(opts.IO.Out, rep)
	}
	fmt.Fprintf(opts.IO.Out, "ok: SHA256SUMS is signed by %s (%s)\n", rep.Signer, rep.Fingerprint)
	fmt.Fprintf(opts.IO.Out, "ok: %d files match SHA256SUMS: %s\n", len(rep.Checked), strings.Join(rep.Checked, ", "))
	if len(rep.Absent) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "not in %s (not checked): %s\n", opts.VerifyRelease, strings.Join(rep.Absent, ", "))
	}
	return nil
}
