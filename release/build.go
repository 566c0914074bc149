package release

import (
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/mod/module"
)

// Build says which build of expiryctl is running: what `expiryctl version`
// reports, and what an audit row records as the build that wrote it.
type Build struct {
	// Version is the release tag linked in by a release build (-ldflags -X
	// commands.Version=…), else the module version of the build
	// information: a tag or pseudo-version for `go install …@VERSION`,
	// "(devel)" or a VCS-derived pseudo-version for a checkout's build.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from. A build of a
	// module from the Go module proxy carries no VCS information; for a
	// pseudo-version the commit's 12-digit prefix comes from the version,
	// and for a tag the commit is unknown (the tag names it).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time, in RFC 3339 UTC.
	CommitTime string `json:"commit_time,omitempty"`
	// BuildDate is when the binary was built, as a reproducible build
	// defines it: the commit's time (what SOURCE_DATE_EPOCH is set to by
	// `make release`), never the wall clock of the build machine, so that
	// two builds of one commit are the same bytes.
	BuildDate string `json:"build_date,omitempty"`
	// Modified says the work tree had changes the commit does not hold
	// when the binary was built: such a binary is not what its commit
	// says.
	Modified bool `json:"modified"`
	// Go is the Go release that built the binary.
	Go string `json:"go"`
}

// unlinked is the value of commands.Version in a binary no release build
// stamped.
const unlinked = "dev"

// Linked is what a release build links into the binary with -ldflags -X
// (scripts/release.sh): the version, and the commit, its time and whether
// the tree was modified, as git said them. Go's own VCS stamping says the
// same and wins; the linked values are for when Go cannot read the VCS
// (it finds a .git directory only, not a git worktree's .git file, nor a
// source archive's missing one), so that a release build always names its
// commit.
type Linked struct {
	Version    string
	Commit     string
	CommitTime string
	Modified   string
}

// Running is the build of the running binary, with what a release build
// linked in (a Version of "dev" when none did).
func Running(linked Linked) Build {
	info, _ := debug.ReadBuildInfo()
	return FromInfo(info, linked)
}

// FromInfo is the build that info (nil when the binary has none) and the
// linked-in values say.
func FromInfo(info *debug.BuildInfo, linked Linked) Build {
	b := Build{Version: linked.Version}
	if linked.Commit != "" {
		b.Commit, b.CommitTime, b.Modified = linked.Commit, linked.CommitTime, linked.Modified == "true"
	}
	if info == nil {
		b.BuildDate = b.CommitTime
		return b
	}
	b.Go = info.GoVersion
	if linked.Version == unlinked || linked.Version == "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	// `go install …@v0.0.0-20261201144759-aa2c770ea888` builds from the
	// module cache, which has no VCS metadata; the pseudo-version names
	// the commit and its time.
	mainVersion := strings.TrimSuffix(info.Main.Version, "+dirty")
	if b.Commit == "" && module.IsPseudoVersion(mainVersion) {
		if rev, err := module.PseudoVersionRev(mainVersion); err == nil {
			b.Commit = rev
		}
		if t, err := module.PseudoVersionTime(mainVersion); err == nil && b.CommitTime == "" {
			b.CommitTime = t.UTC().Format(time.RFC3339)
		}
	}
	b.BuildDate = b.CommitTime
	return b
}

// String is the build on one line:
// "v1.2.0 (commit 1a2b3c4d5e6f, 2026-12-01T12:00:00Z, modified) go1.26.8".
func (b Build) String() string {
	var about []string
	if b.Commit != "" {
		about = append(about, "commit "+b.Commit[:min(12, len(b.Commit))])
	}
	if b.CommitTime != "" {
		about = append(about, b.CommitTime)
	}
	if b.Modified {
		about = append(about, "modified")
	}
	s := b.Version
	if len(about) > 0 {
		s += " (" + strings.Join(about, ", ") + ")"
	}
	if b.Go != "" {
		s += " " + b.Go
	}
	return s
}

// Claim is how the build names itself to the database, which records it in
// every audit row the session writes: the version, the whole commit and
// whether the tree was modified, "v1.2.0 (commit 1a2b…, modified)". It is
// what the client claims, nothing the database can check.
func (b Build) Claim() string {
	var about []string
	if b.Commit != "" {
		about = append(about, "commit "+b.Commit)
	}
	if b.Modified {
		about = append(about, "modified")
	}
	s := b.Version
	if s == "" {
		s = "unknown"
	}
	if len(about) > 0 {
		s += " (" + strings.Join(about, ", ") + ")"
	}
	return s
}
