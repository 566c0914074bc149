package requestview

import (
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/replay"
)

func TestRunnerLines(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	base := replay.Request{ID: 8, Kind: replay.KindReplay, Status: replay.StatusRunning}
	gone, held, unread, pending := base, base, base, base
	gone.RunnerHeld = &no
	held.RunnerHeld, held.Runner = &yes, "\"expiryctl replay run by \x1b[2Jmallory@h\" (PostgreSQL backend 7)"
	pending.Status = replay.StatusPending
	tests := []struct {
		name   string
		r      replay.Request
		status string
		note   string
		field  string // in the rendered view; "" for no runner field
	}{
		{"runner gone", gone, "running (no runner)",
			"replay request 8 is running, but no runner holds it: nothing is being published; resume it with `expiryctl replay run 8`",
			"  runner               none: no process runs this request (its runner was interrupted, killed or lost its connection), so its counts stand still; resume it with `expiryctl replay run 8` (no new approval needed)"},
		{"runner holds it, escaped", held, "running", "", `  runner               held by "expiryctl replay run by \x1b[2Jmallory@h" (PostgreSQL backend 7)`},
		{"read without its runner", unread, "running", "", ""},
		{"not running", pending, "pending", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := StatusLabel(tt.r); got != tt.status {
				t.Errorf("StatusLabel = %q, want %q", got, tt.status)
			}
			if got := RunnerGoneNote(tt.r); got != tt.note {
				t.Errorf("RunnerGoneNote = %q, want %q", got, tt.note)
			}
			view := Render(replay.Detail{Request: tt.r}, Styles{}, "")
			if !strings.HasPrefix(view, "Replay request 8 — replay "+tt.status+"\n") {
				t.Errorf("title: %q", strings.SplitN(view, "\n", 2)[0])
			}
			var field string
			for _, l := range strings.Split(view, "\n") {
				if strings.HasPrefix(l, "  runner ") {
					field = l
				}
			}
			want := strings.ReplaceAll(tt.field, "\x1b", `\x1b`)
			if field != want {
				t.Errorf("runner field %q, want %q", field, want)
			}
		})
	}
}
