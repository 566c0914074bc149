package deadletter

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// LetterRedeadByRequest implements letterStore. It reads the partial index
// dead_letters_replay_request, which holds only letters captured from a
// replay: its cost grows with the re-dead letters, not with the archive.
func (s postgresLetters) LetterRedeadByRequest(ctx context.Context, w SignalsOptions) ([]RequestRedead, error) {
	where, args := FilterSQL(Filter{Since: w.Since, Until: w.Until})
	where = append(where, "replay_request_id IS NOT NULL")
	args = append(args, maxRedeadRequests)
	rows, err := s.q.Query(ctx, `
		SELECT replay_request_id, count(*), count(*) FILTER (WHERE status IN ('dead', 'in_request')), max(dead_lettered_at)
		FROM `+lettersWithStatus+`
		WHERE `+strings.Join(where, " AND ")+`
		GROUP BY replay_request_id
		ORDER BY replay_request_id DESC
		LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RequestRedead, error) {
		var r RequestRedead
		var last time.Time
		err := row.Scan(&r.RequestID, &r.Letters, &r.Waiting, &last)
		r.LastDeadLetteredAt = last.UTC()
		return r, err
	})
	if out == nil {
		out = []RequestRedead{}
	}
	return out, err
}
