package service

import (
	"context"

	"github.com/expiryctl/expiryctl/deadletter"
)

// LetterCounter is implemented by an archive that can count the letters a
// filter matches, up to a bound, without writing an audit row: the terminal
// UI shows the count as a filter is typed, in a cohort form, and as its
// list's total. *deadletter.Archive implements it.
type LetterCounter interface {
	CountMatching(ctx context.Context, f deadletter.Filter, upTo int) (deadletter.MatchCount, error)
}

// EligibleCounter is implemented by an archive that can count, unaudited,
// the letters of a filter that a request by that filter could take now
// (the schema's letters_matching: dead, not redacted), for the terminal
// UI's cohort form. *deadletter.Archive implements it.
type EligibleCounter interface {
	CountEligible(ctx context.Context, f deadletter.Filter, upTo int) (deadletter.MatchCount, error)
}
