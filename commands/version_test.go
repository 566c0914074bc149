package commands

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionComesFromTheBuild(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201144759-aa2c770ea888+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aa2c770ea888f00d"}, {Key: "vcs.time", Value: "2026-12-01T14:47:59Z"},
			{Key: "vcs.modified", Value: "true"}}}
	v := buildVersionOf(info, "dev")
	if got, want := v.String(), "v0.0.0-20261201144759-aa2c770ea888+dirty (commit aa2c770ea888, 2026-12-01T14:47:59Z, modified) go1.26.8"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	if got := buildVersionOf(info, "v1.4.0").Version; got != "v1.4.0" {
		t.Errorf("a version linked in with -ldflags gives %q, want it kept", got)
	}
	if got := buildVersionOf(nil, "dev").String(); got != "dev" {
		t.Errorf("without build information: %q", got)
	}

	var out bytes.Buffer
	if err := versionRun(&out, "json", v); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc["commit"] != "aa2c770ea888f00d" || doc["modified"] != true || doc["go"] != "go1.26.8" {
		t.Errorf("json %s (%v)", out.String(), err)
	}
	out.Reset()
	if err := versionRun(&out, "text", v); err != nil || !strings.HasPrefix(out.String(), "expiryctl v0.0.0-") {
		t.Errorf("text %q (%v)", out.String(), err)
	}
}
