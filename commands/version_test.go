package commands

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/release"
)

func TestVersionPrintsTheBuild(t *testing.T) {
	t.Parallel()
	v := release.Build{Version: "v1.4.0", Commit: "aa2c770ea888f00d", CommitTime: "2026-12-01T14:47:59Z",
		BuildDate: "2026-12-01T14:47:59Z", Modified: true, Go: "go1.26.8"}
	var out bytes.Buffer
	if err := versionRun(&out, "json", v); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc["commit"] != "aa2c770ea888f00d" || doc["modified"] != true ||
		doc["go"] != "go1.26.8" || doc["build_date"] != "2026-12-01T14:47:59Z" {
		t.Errorf("json %s (%v)", out.String(), err)
	}
	out.Reset()
	if err := versionRun(&out, "text", v); err != nil || out.String() != "expiryctl v1.4.0 (commit aa2c770ea888, 2026-12-01T14:47:59Z, modified) go1.26.8\n" {
		t.Errorf("text %q (%v)", out.String(), err)
	}
}

func TestVerifyReleaseNeedsItsSigners(t *testing.T) {
	t.Parallel()
	f := &Factory{IO: &IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
	cmd := NewCmdVersion(f)
	cmd.SetArgs([]string{"--verify-release", t.TempDir()})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--signers") {
		t.Fatalf("err %v (exit %d), want a usage error naming --signers", err, ExitCode(err))
	}
}
