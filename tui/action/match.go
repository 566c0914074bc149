package action

import (
	"fmt"

	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/tui/backend"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// matchBound is how far the cohort form counts the filter's letters.
const matchBound = 100_000

// matchLine says how many letters a cohort by filter matches now, for its
// form; empty for letters chosen by id, or when the archive cannot count.
// The database resolves the cohort again when the request is made: the
// line is a guide to max, not the cohort.
func matchLine(svc backend.Services, sel Selection) string {
	// Only letters waiting for a decision can join a request: a count of
	// every status would promise the replayed and the discarded too.
	counter, ok := svc.Archive.(service.EligibleCounter)
	if len(sel.IDs) > 0 || !ok {
		return ""
	}
	ctx, cancel := frame.Call()
	defer cancel()
	n, err := counter.CountEligible(ctx, sel.Filter, matchBound)
	switch {
	case err != nil:
		return "could not count the letters it could take now: " + termsafe.EscapeLine(err.Error())
	case n.More:
		return fmt.Sprintf("more than %d letters waiting for a decision match it now; max takes the oldest", n.N)
	}
	return phrase.Count(n.N, "letter waiting for a decision matches", "letters waiting for a decision match") + " it now; max takes the oldest"
}
