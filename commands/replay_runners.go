package commands

import (
	"fmt"
	"strconv"

	"github.com/expiryctl/expiryctl/internal/view/requestview"
	"github.com/expiryctl/expiryctl/replay"
)

// noteRunnersGone says on stderr, below a list of requests, which running
// requests no runner holds and how to resume each: their status alone
// reads as if they were making progress.
func noteRunnersGone(streams *IOStreams, reqs []replay.Request) {
	st := styles(streams)
	for _, r := range reqs {
		if note := requestview.RunnerGoneNote(r); note != "" {
			fmt.Fprintln(streams.ErrOut, st.warn.Render(note))
		}
	}
}

// runnersGone are the ids of the running requests of reqs that no runner
// holds.
func runnersGone(reqs []replay.Request) []string {
	var ids []string
	for _, r := range reqs {
		if r.RunnerGone() {
			ids = append(ids, strconv.FormatInt(r.ID, 10))
		}
	}
	return ids
}
