package commands

import (
	"fmt"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// printRequestFlags says on stderr what a new request's flags loosen, so
// the requester reads what the approver will.
func printRequestFlags(streams *IOStreams, r replay.Request) {
	if r.SameHandlerOK {
		fmt.Fprintf(streams.ErrOut, "the run skips the handler check (--same-handler-ok): %s\n", termsafe.EscapeLine(r.SameHandlerWhy))
	}
	if r.IncludePermanent {
		fmt.Fprintln(streams.ErrOut, "the cohort may hold letters that failed for good (--include-permanent)")
	}
}

// printReviewFlags says on stderr, before an approval, what the approver
// approves beyond the cohort: the requester's word that the same handler
// may take it, and letters that failed for good.
func printReviewFlags(streams *IOStreams, d replay.Detail) {
	if d.SameHandlerOK {
		fmt.Fprintf(streams.ErrOut, "  the requester allows the handler that failed the letters to take them again: %s\n", termsafe.EscapeLine(d.SameHandlerWhy))
	}
	if d.IncludePermanent || d.PermanentCount > 0 {
		fmt.Fprintf(streams.ErrOut, "  it includes %s that failed for good (conflict, validation, malformed, not-found)\n", phrase.Count(d.PermanentCount, "letter", "letters"))
	}
	if d.Handler != nil && !d.Handler.Allowed && d.Handler.Condition != "" {
		fmt.Fprintf(streams.ErrOut, "  as things stand its run would be refused (%s): %s\n", d.Handler.Condition, termsafe.EscapeLine(d.Handler.Reason))
	}
}
