package commands

import (
	"fmt"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// handlerHelp is what `replay request --help` says of the handler check
// and of letters not worth retrying.
const handlerHelp = `A replay runs only onto a handler other than the one that failed its letters:
` + "`replay run`" + ` refuses to start, and halts a run, when no consumer of the
target queues advertises a handler version the cohort did not fail under
(x-handler-version on the letters, handler-version on the consumers'
connections), when nothing consumes them, or when RabbitMQ's management API
cannot say. --same-handler-ok "why" allows it (the dependency recovered and
the handler was never at fault); the approver sees the reason.

Letters that failed for good (conflict, validation, malformed, not-found) are
refused unless --include-permanent says to replay them anyway; to decide
"never retry", ask for a discard with ` + "`expiryctl dlq discard`" + `, which a
second person approves.`

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
