package replay

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

func (p postgresTables) GapRow(ctx context.Context, sql string) (int64, *time.Time, time.Time, bool, error) {
	var at time.Time
	if err := p.q.QueryRow(ctx, "SELECT set_config('statement_timeout', $1, true), now()", strconv.FormatInt(GapTimeout.Milliseconds(), 10)).Scan(nil, &at); err != nil {
		return 0, nil, time.Time{}, false, err
	}
	var past int64
	var oldest *time.Time
	err := p.q.QueryRow(ctx, sql).Scan(&past, &oldest)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, at, false, nil
	}
	return past, oldest, at, err == nil, err
}
