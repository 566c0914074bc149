package release

import (
	"runtime/debug"
	"testing"
)

func TestBuildComesFromTheBuildInformation(t *testing.T) {
	t.Parallel()
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201144759-aa2c770ea888+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aa2c770ea888f00d"}, {Key: "vcs.time", Value: "2026-12-01T14:47:59Z"},
			{Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name      string
		info      *debug.BuildInfo
		linked    Linked
		want      Build
		line      string
		claim     string
		buildDate string
	}{
		{
			name: "a checkout's build", info: checkout, linked: Linked{Version: "dev"},
			line:  "v0.0.0-20261201144759-aa2c770ea888+dirty (commit aa2c770ea888, 2026-12-01T14:47:59Z, modified) go1.26.8",
			claim: "v0.0.0-20261201144759-aa2c770ea888+dirty (commit aa2c770ea888f00d, modified)", buildDate: "2026-12-01T14:47:59Z",
		},
		{
			name: "a release build keeps the version it linked in", info: checkout, linked: Linked{Version: "v1.4.0"},
			line:  "v1.4.0 (commit aa2c770ea888, 2026-12-01T14:47:59Z, modified) go1.26.8",
			claim: "v1.4.0 (commit aa2c770ea888f00d, modified)", buildDate: "2026-12-01T14:47:59Z",
		},
		{
			// go install …@pseudo-version builds from the module cache:
			// no VCS settings, but the version names the commit and time.
			name: "go install of a pseudo-version", linked: Linked{Version: "dev"},
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201144759-aa2c770ea888"}},
			line: "v0.0.0-20261201144759-aa2c770ea888 (commit aa2c770ea888, 2026-12-01T14:47:59Z) go1.26.8",
			// the 12 digits are all a pseudo-version holds of the commit
			claim: "v0.0.0-20261201144759-aa2c770ea888 (commit aa2c770ea888)", buildDate: "2026-12-01T14:47:59Z",
		},
		{
			name: "go install of a tag", linked: Linked{Version: "dev"},
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}},
			line: "v1.2.0 go1.26.8", claim: "v1.2.0",
		},
		{name: "no build information", linked: Linked{Version: "dev"}, line: "dev", claim: "dev"},
		{
			// Go stamps no VCS settings in a git worktree; a release
			// build's linked commit says what it would have.
			name: "a release build where Go could not read git", info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			linked: Linked{Version: "v1.4.0", Commit: "aa2c770ea888f00d", CommitTime: "2026-12-01T14:47:59Z", Modified: "false"},
			line:   "v1.4.0 (commit aa2c770ea888, 2026-12-01T14:47:59Z) go1.26.8", claim: "v1.4.0 (commit aa2c770ea888f00d)", buildDate: "2026-12-01T14:47:59Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := FromInfo(tt.info, tt.linked)
			if got := b.String(); got != tt.line {
				t.Errorf("String() = %q, want %q", got, tt.line)
			}
			if got := b.Claim(); got != tt.claim {
				t.Errorf("Claim() = %q, want %q", got, tt.claim)
			}
			if b.BuildDate != tt.buildDate {
				t.Errorf("BuildDate = %q, want %q (the commit's time)", b.BuildDate, tt.buildDate)
			}
		})
	}
}
