package commands

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X …/commands.Version=…";
// when it is not, the version comes from the binary's build information.
var Version = "dev"

// BuildVersion is what `expiryctl version` reports.
type BuildVersion struct {
	// Version is the module's version: a release tag, the pseudo-version
	// Go derives from the commit, or "(devel)".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, Modified
	// whether the work tree had changes then, and Time the commit's time.
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// readBuildVersion reads the running binary's build information.
func readBuildVersion() BuildVersion {
	info, _ := debug.ReadBuildInfo()
	return buildVersionOf(info, Version)
}

// buildVersionOf is the version that info (nil when the binary has none)
// and the linked-in version say.
func buildVersionOf(info *debug.BuildInfo, linked string) BuildVersion {
	v := BuildVersion{Version: linked}
	if info == nil {
		return v
	}
	v.Go = info.GoVersion
	if linked == "dev" || linked == "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the version on one line: "v1.2.0 (commit 1a2b3c4d5e6f, 2026-12-01T12:00:00Z, modified) go1.26.8".
func (v BuildVersion) String() string {
	var about []string
	if v.Commit != "" {
		about = append(about, "commit "+v.Commit[:min(12, len(v.Commit))])
	}
	if v.Time != "" {
		about = append(about, v.Time)
	}
	if v.Modified {
		about = append(about, "modified")
	}
	s := v.Version
	if len(about) > 0 {
		s += " (" + strings.Join(about, ", ") + ")"
	}
	if v.Go != "" {
		s += " " + v.Go
	}
	return s
}

// NewCmdVersion builds `expiryctl version`.
func NewCmdVersion(f *Factory) *cobra.Command {
	var output *outputFormat
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print expiryctl's version and the commit it was built from",
		Long: `Print expiryctl's version, the commit it was built from and the Go release
that built it, from the binary's own build information. --version prints the
same line.`,
		Example: `  expiryctl version
  expiryctl version -o json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return versionRun(f.IO.Out, output.value, readBuildVersion())
		},
	}
	output = addOutputFlag(cmd, "text", "json")
	return cmd
}

func versionRun(w io.Writer, format string, v BuildVersion) error {
	if format == "json" {
		return writeJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "expiryctl %s\n", v)
	return err
}
