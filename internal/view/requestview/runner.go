package requestview

import (
	"fmt"
	"strings"

	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// StatusLabel is a request's status as a person should read it: "running
// (no runner)" for a running request that no runner holds, whose counts
// stand still until someone resumes it; the status itself otherwise.
func StatusLabel(r replay.Request) string {
	if r.RunnerGone() {
		return string(r.Status) + " (no runner)"
	}
	return string(r.Status)
}

// RunnerGoneNote is the one line that says a request's runner is gone and
// the command that resumes it; empty unless r.RunnerGone().
func RunnerGoneNote(r replay.Request) string {
	if !r.RunnerGone() {
		return ""
	}
	return fmt.Sprintf("%s request %d is running, but no runner holds it: nothing is being published; resume it with `%s`",
		r.Kind, r.ID, r.ResumeCommand())
}

// runnerLine is the view's runner field: who holds a running request, or,
// warned, that nobody does, why that happens and how to resume it; empty
// for a request that is not running or was read without its runner.
func runnerLine(r replay.Request, st Styles) string {
	switch {
	case r.RunnerGone():
		return st.Warn(fmt.Sprintf("none: no process runs this request (its runner was interrupted, killed or lost its connection), "+
			"so its counts stand still; resume it with `%s` (no new approval needed)", r.ResumeCommand()))
	case r.RunnerHeld != nil && r.Runner != "":
		return "held by " + termsafe.EscapeLine(r.Runner)
	case r.RunnerHeld != nil:
		return "held by a runner"
	}
	return ""
}

// FatesCell is a list's cell of what became of a replay's confirmed items:
// "38 back, 2 unknown", naming only the counts that are not zero; "-" for
// a request that confirmed nothing.
func FatesCell(f *replay.Fates) string {
	if f == nil || f.Confirmed == 0 {
		return "-"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{f.CameBack, "back"}, {f.Settled, "settled"}, {f.Unknown, "unknown"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}
