package service

import (
	"context"

	"github.com/expiryctl/expiryctl/replay"
)

// A watch (`--watch` on `dlq summary`, `replay show` and `replay list`)
// reads once through the audited service and redraws through an unaudited
// one, so that a watch leaves one audit row however long it runs. The
// unaudited archive is an Archive made WithoutListingAudit; the unaudited
// requests are RequestReads.

// RequestReads reads replay and discard requests without writing an audit
// row, for the redraws of a watch whose first read went through Requests
// (which RequestReads is a part of). List still expires requests past
// their review or approval window, each with its own replay.expire row: a
// listing must not show a request as pending once it can no longer be
// approved. *replay.UnauditedReads implements it.
type RequestReads interface {
	Show(ctx context.Context, id int64, sample int) (replay.Detail, error)
	List(ctx context.Context, status replay.Status, limit int) ([]replay.Request, error)
}
