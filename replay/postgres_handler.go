package replay

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
)

func (p postgresTables) ItemsPermanent(ctx context.Context, request int64, limit int) ([]PermanentLetter, error) {
	rows, err := p.q.Query(ctx, `SELECT i.dead_letter_id, d.reason_category, coalesce(d.error_class, ''), left(coalesce(d.last_error, ''), 300)
		FROM expiryctl.replay_items i JOIN expiryctl.dead_letters d ON d.id = i.dead_letter_id
		WHERE i.request_id = $1 AND d.reason_category = ANY ($3)
		ORDER BY i.ordinal LIMIT $2`, request, limit, deadletter.PermanentCategoryNames())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PermanentLetter, error) {
		var l PermanentLetter
		err := row.Scan(&l.DeadLetterID, &l.Category, &l.ErrorClass, &l.LastError)
		return l, err
	})
}
