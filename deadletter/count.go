package deadletter

import "context"

// MatchCount is how many letters a filter matches, counted up to a bound:
// More says there are more than N (the count stopped at the bound).
type MatchCount struct {
	N    int
	More bool
}

// CountMatching counts the letters matching f, up to upTo (at least 1), so
// that a count typed live as a filter changes costs at most upTo index
// entries however large the archive. It writes no audit row: it is the
// terminal UI's live count beside a listing or a cohort form, whose
// session is audited when it opens and whose request, if made, is audited
// with the cohort the database resolves.
func (a *Archive) CountMatching(ctx context.Context, f Filter, upTo int) (MatchCount, error) {
	upTo = max(1, upTo)
	n, err := a.letters.LetterCount(ctx, f, upTo+1)
	if err != nil {
		return MatchCount{}, err
	}
	if n > upTo {
		return MatchCount{N: upTo, More: true}, nil
	}
	return MatchCount{N: n}, nil
}

// CountEligible counts, up to upTo, the letters matching f that a request
// by filter could take now: those the schema's letters_matching selects
// (waiting for a decision, so not replayed, discarded or in an open
// request, and not redacted). A cohort form shows it rather than
// CountMatching, whose count of every status promises letters the request
// will not get. Like CountMatching it writes no audit row.
func (a *Archive) CountEligible(ctx context.Context, f Filter, upTo int) (MatchCount, error) {
	upTo = max(1, upTo)
	n, err := a.letters.LetterCountEligible(ctx, f, upTo+1)
	if err != nil {
		return MatchCount{}, err
	}
	if n > upTo {
		return MatchCount{N: upTo, More: true}, nil
	}
	return MatchCount{N: n}, nil
}
