package requests

import (
	"fmt"

	"github.com/expiryctl/expiryctl/replay"
)

// statusCell is a request's STATUS cell: "no runner" for a running request
// that no runner holds (it fits the column, and its counts stand still),
// the status otherwise.
func statusCell(r replay.Request) string {
	if r.RunnerGone() {
		return "no runner"
	}
	return string(r.Status)
}

// runnersGoneNote says which listed running request has no runner and how
// to resume it, here or from a shell; empty when every running request
// has its runner.
func runnersGoneNote(reqs []replay.Request) string {
	var gone []replay.Request
	for _, r := range reqs {
		if r.RunnerGone() {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return ""
	}
	r := gone[0]
	note := fmt.Sprintf("request %d has no runner: g or `%s` resumes it", r.ID, r.ResumeCommand())
	if len(gone) > 1 {
		note += fmt.Sprintf(" (%d more have none)", len(gone)-1)
	}
	return note
}
