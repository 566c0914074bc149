package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/store"
)

// postgresLetters is the PostgreSQL letterStore. Over a pool each method
// runs on its own; over a transaction its statements commit with the
// caller's.
type postgresLetters struct {
	q store.Querier
}

// newPostgresLetters returns the letterStore over q: a pool, a connection
// or a transaction.
func newPostgresLetters(q store.Querier) letterStore { return postgresLetters{q: q} }

// LetterInsertBatch implements letterStore. The letters travel as one array
// per column, in one round trip; ON CONFLICT on the fingerprint, inside
// ingest_letters, makes a redelivery a no-op, also for two copies inside
// the same batch. The database hashes each payload itself.
func (s postgresLetters) LetterInsertBatch(ctx context.Context, actor, queue string, letters []Letter) ([]int64, error) {
	c := newIngestColumns(len(letters))
	for i := range letters {
		if err := c.set(i, &letters[i]); err != nil {
			return nil, err
		}
	}
	rows, err := s.q.Query(ctx, `SELECT expiryctl.ingest_letters($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
			$14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)`,
		actor, queue, c.fingerprints, c.jobKeys, c.messageIDs, c.reservationIDs, c.idempotencyKeys, c.versions, c.dueAts,
		c.sourceQueues, c.originQueues, c.exchanges, c.routingKeys, c.categories, c.errorClasses, c.lastErrors, c.attempts,
		c.histories, c.headers, c.contentTypes, c.payloads, c.deadAts, c.replayRequests, c.replayCounts, c.properties,
		c.systems, c.natives, c.connections)
	if err != nil {
		return nil, store.AsRefusal(err)
	}
	// The function's own refusals arrive with the rows, not from Query.
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, store.AsRefusal(err)
}

// ingestColumns are the arguments of ingest_letters: one array per column,
// element i for letter i.
type ingestColumns struct {
	fingerprints    [][]byte
	jobKeys         []*string
	messageIDs      []*string
	reservationIDs  []*string
	idempotencyKeys []*string
	versions        []*int64
	dueAts          []*time.Time
	sourceQueues    []string
	originQueues    []*string
	exchanges       []*string
	routingKeys     []*string
	categories      []string
	errorClasses    []*string
	lastErrors      []*string
	attempts        []int32
	histories       [][]byte
	headers         [][]byte
	contentTypes    []*string
	payloads        [][]byte
	deadAts         []time.Time
	replayRequests  []*int64
	replayCounts    []int32
	properties      [][]byte
	systems         []string
	natives         [][]byte
	connections     []*string
}

func newIngestColumns(n int) *ingestColumns {
	return &ingestColumns{
		fingerprints:    make([][]byte, n),
		jobKeys:         make([]*string, n),
		messageIDs:      make([]*string, n),
		reservationIDs:  make([]*string, n),
		idempotencyKeys: make([]*string, n),
		versions:        make([]*int64, n),
		dueAts:          make([]*time.Time, n),
		sourceQueues:    make([]string, n),
		originQueues:    make([]*string, n),
		exchanges:       make([]*string, n),
		routingKeys:     make([]*string, n),
		categories:      make([]string, n),
		errorClasses:    make([]*string, n),
		lastErrors:      make([]*string, n),
		attempts:        make([]int32, n),
		histories:       make([][]byte, n),
		headers:         make([][]byte, n),
		contentTypes:    make([]*string, n),
		payloads:        make([][]byte, n),
		deadAts:         make([]time.Time, n),
		replayRequests:  make([]*int64, n),
		replayCounts:    make([]int32, n),
		properties:      make([][]byte, n),
		systems:         make([]string, n),
		natives:         make([][]byte, n),
		connections:     make([]*string, n),
	}
}

// set fills element i from l: an empty text is NULL, and the columns that
// are NOT NULL get their empty value.
func (c *ingestColumns) set(i int, l *Letter) error {
	c.fingerprints[i] = l.Fingerprint[:]
	c.jobKeys[i] = nullable(l.JobKey)
	c.messageIDs[i] = nullable(l.MessageID)
	c.reservationIDs[i] = nullable(l.ReservationID)
	c.idempotencyKeys[i] = nullable(l.IdempotencyKey)
	c.versions[i] = l.ExpectedVersion
	c.dueAts[i] = l.DueAt
	c.sourceQueues[i] = l.SourceQueue
	c.originQueues[i] = nullable(l.OriginQueue)
	c.exchanges[i] = nullable(l.OriginalExchange)
	c.routingKeys[i] = nullable(l.OriginalRoutingKey)
	c.categories[i] = string(l.Category)
	c.errorClasses[i] = nullable(l.ErrorClass)
	c.lastErrors[i] = nullable(l.LastError)
	c.attempts[i] = int32(min(l.Attempts, 1<<31-1))
	history, err := appendAttemptHistory(make([]byte, 0, 128*len(l.AttemptHistory)+2), l.AttemptHistory)
	if err != nil {
		return fmt.Errorf("encode attempt history: %w", err)
	}
	// The JSON columns travel as bytes: a text parameter takes them as
	// they are, where a string would copy each.
	c.histories[i] = history
	c.headers[i] = l.Headers
	if len(l.Headers) == 0 {
		c.headers[i] = []byte("{}")
	}
	c.contentTypes[i] = nullable(l.ContentType)
	c.payloads[i] = l.Payload
	if c.payloads[i] == nil {
		c.payloads[i] = []byte{}
	}
	c.deadAts[i] = l.DeadLetteredAt
	c.replayRequests[i] = l.ReplayRequestID
	c.replayCounts[i] = int32(min(l.ReplayCount, 1<<31-1))
	c.properties[i] = nil // NULL: stored without properties
	if l.Properties != nil {
		c.properties[i] = EncodeProperties(*l.Properties)
	}
	c.systems[i] = string(l.System.OrDefault())
	c.natives[i] = l.Native // nil: NULL
	c.connections[i] = nullable(l.Connection)
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// LetterSummary implements letterStore. Its cost does not grow with the
// archive: counts come from the trigger-maintained tallies and the oldest
// letter from a partial index.
func (s postgresLetters) LetterSummary(ctx context.Context) ([]CategorySummary, error) {
	rows, err := s.q.Query(ctx, `
		SELECT t.reason_category,
		       coalesce(sum(t.letters) FILTER (WHERE t.status IN ('dead', 'in_request')), 0)::bigint,
		       sum(t.letters)::bigint,
		       coalesce(array_agg(DISTINCT t.source_queue ORDER BY t.source_queue)
		                FILTER (WHERE t.status IN ('dead', 'in_request') AND t.letters > 0), '{}'),
		       (SELECT min(s.dead_lettered_at) FROM expiryctl.dead_letter_states s
		         WHERE s.reason_category = t.reason_category AND s.status IN ('dead', 'in_request'))
		FROM expiryctl.dead_letter_tallies t
		GROUP BY t.reason_category
		HAVING sum(t.letters) > 0`)
	if err != nil {
		return nil, err
	}
	var out []CategorySummary
	for rows.Next() {
		var c CategorySummary
		var oldest *time.Time
		if err := rows.Scan(&c.Category, &c.Count, &c.Total, &c.Queues, &oldest); err != nil {
			rows.Close()
			return nil, err
		}
		c.Systems = queueSystems(c.Queues)
		if oldest != nil {
			utc := oldest.UTC()
			c.OldestDeadLetteredAt = &utc
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// lettersWithStatus is dead_letters with each letter's status (kept in
// dead_letter_states, where it moves without rewriting the letter) as one
// more column, under the table's own name: the conditions FilterSQL builds
// and listColumns read the same over either.
const lettersWithStatus = `(SELECT l.*, s.status FROM expiryctl.dead_letters l
	JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = l.id) AS dead_letters`

// listColumns are the columns of a Row, in the order rowFields scans them,
// read from lettersWithStatus.
const listColumns = `id, coalesce(message_id, ''), coalesce(reservation_id, ''), coalesce(idempotency_key, ''),
	reason_category, coalesce(error_class, ''), attempts, status, source_queue, dead_lettered_at, due_at,
	coalesce(last_error, ''), previous_id, replay_request_id, source_system`

// rowFields are the scan targets of listColumns.
func rowFields(r *Row) []any {
	return []any{&r.ID, &r.MessageID, &r.ReservationID, &r.IdempotencyKey, &r.Category, &r.ErrorClass,
		&r.Attempts, &r.Status, &r.SourceQueue, &r.DeadLetteredAt, &r.DueAt, &r.LastError, &r.PreviousID, &r.ReplayRequestID, &r.System}
}

func scanRow(row pgx.CollectableRow) (Row, error) {
	var r Row
	err := row.Scan(rowFields(&r)...)
	r.DeadLetteredAt = r.DeadLetteredAt.UTC()
	if r.DueAt != nil {
		utc := r.DueAt.UTC()
		r.DueAt = &utc
	}
	return r, err
}

// LetterList implements letterStore. It pages by keyset on
// (dead_lettered_at, id), so a page deep in a large archive costs what the
// first page costs.
func (s postgresLetters) LetterList(ctx context.Context, p letterListParams) ([]Row, error) {
	where, args := FilterSQL(p.Filter)
	cmp, order := "<", "DESC"
	if p.OldestFirst {
		cmp, order = ">", "ASC"
	}
	if p.After != nil {
		args = append(args, p.After.DeadLetteredAt, p.After.ID)
		where = append(where, fmt.Sprintf("(dead_lettered_at, id) %s ($%d, $%d)", cmp, len(args)-1, len(args)))
	}
	sql := "SELECT " + listColumns + " FROM " + lettersWithStatus
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, p.Limit)
	sql += fmt.Sprintf(" ORDER BY dead_lettered_at %[1]s, id %[1]s LIMIT $%[2]d", order, len(args))

	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRow)
}

// FilterSQL returns the WHERE conditions (over expiryctl.dead_letters, or
// lettersWithStatus when f sets a status) and
// arguments for f, numbered from $1. Only the conditions f sets are built, so
// each query gets a plan for exactly its filter rather than a generic plan
// full of "IS NULL OR".
func FilterSQL(f Filter) ([]string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(f.Categories) > 0 {
		names := make([]string, len(f.Categories))
		for i, c := range f.Categories {
			names[i] = string(c)
		}
		add("reason_category = ANY($%d)", names)
	}
	if f.Queue != "" {
		add("source_queue = $%d", f.Queue)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if !f.Since.IsZero() {
		add("dead_lettered_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("dead_lettered_at < $%d", f.Until)
	}
	if f.ReplayRequest != 0 {
		add("replay_request_id = $%d", f.ReplayRequest)
	}
	if f.Search != "" {
		pattern := "%" + likeEscaper.Replace(f.Search) + "%"
		add(`(reservation_id ILIKE $%[1]d OR message_id ILIKE $%[1]d OR idempotency_key ILIKE $%[1]d
			OR error_class ILIKE $%[1]d OR last_error ILIKE $%[1]d)`, pattern)
	}
	return where, args
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// LetterGet implements letterStore.
func (s postgresLetters) LetterGet(ctx context.Context, id int64) (storedLetter, error) {
	var l storedLetter
	d := &l.Detail
	err := s.q.QueryRow(ctx, "SELECT "+listColumns+`,
		coalesce(origin_queue, ''), coalesce(original_exchange, ''), coalesce(original_routing_key, ''),
		expected_version, coalesce(content_type, ''), attempt_history, headers, payload, payload_size,
		payload_sha256, ingested_at, replay_count, redacted_at, job_key, properties, native
		FROM `+lettersWithStatus+` WHERE id = $1`, id).Scan(append(rowFields(&d.Row),
		&d.OriginQueue, &d.OriginalExchange, &d.OriginalRoutingKey, &d.ExpectedVersion, &d.ContentType,
		&l.history, &d.Headers, &d.Payload, &d.PayloadSize, &l.payloadHash, &d.IngestedAt, &d.ReplayCount, &d.RedactedAt,
		&l.jobKey, &l.properties, &d.Native)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return storedLetter{}, &NotFoundError{ID: id}
	}
	return l, err
}

// LetterListByJob implements letterStore.
func (s postgresLetters) LetterListByJob(ctx context.Context, jobKey string, exceptID int64) ([]Row, error) {
	rows, err := s.q.Query(ctx, "SELECT "+listColumns+
		" FROM "+lettersWithStatus+" WHERE job_key = $1 AND id <> $2 ORDER BY id LIMIT 100", jobKey, exceptID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRow)
}

// LetterPurgeCount implements letterStore.
func (s postgresLetters) LetterPurgeCount(ctx context.Context, olderThan time.Duration) (PurgeResult, error) {
	var res PurgeResult
	if err := s.q.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, olderThan.Seconds()).Scan(&res.Cutoff); err != nil {
		return res, err
	}
	res.Cutoff = res.Cutoff.UTC()
	err := s.q.QueryRow(ctx, `SELECT
			count(*),
			count(*) FILTER (WHERE status = 'in_request')
		FROM `+lettersWithStatus+` WHERE ingested_at < $1 AND redacted_at IS NULL`, res.Cutoff).Scan(&res.Redacted, &res.InRequest)
	return res, err
}

// LetterPurge implements letterStore.
func (s postgresLetters) LetterPurge(ctx context.Context, actor string, cutoff time.Time, batch int, after int64) ([]int64, error) {
	rows, err := s.q.Query(ctx, `SELECT expiryctl.purge_letters($1, $2, $3, $4)`, actor, cutoff, batch, after)
	if err != nil {
		return nil, store.AsRefusal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, store.AsRefusal(err)
}

// LetterPurgeLeft implements letterStore.
func (s postgresLetters) LetterPurgeLeft(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.q.QueryRow(ctx, `SELECT count(*) FROM `+lettersWithStatus+`
		WHERE ingested_at < $1 AND redacted_at IS NULL AND status <> 'in_request'`, cutoff).Scan(&n)
	return n, err
}

// LetterCount implements letterStore. The LIMIT inside bounds the count's
// cost by limit, not by the archive's size.
func (s postgresLetters) LetterCount(ctx context.Context, f Filter, limit int) (int, error) {
	where, args := FilterSQL(f)
	// The status join only when the filter reads the status: a count of
	// the letters alone stays on their own indexes.
	from := "expiryctl.dead_letters"
	if f.Status != "" {
		from = lettersWithStatus
	}
	return s.countBounded(ctx, from, where, args, limit)
}

// LetterCountEligible implements letterStore. letters_matching itself is
// the schema's, callable only inside its functions; its conditions beyond
// the filter's are two, kept here beside it.
func (s postgresLetters) LetterCountEligible(ctx context.Context, f Filter, limit int) (int, error) {
	if f.Status != "" && f.Status != StatusDead {
		return 0, nil
	}
	// letters_matching reads no replay request: the cohort of a filter
	// that names one is the filter without it.
	f.Status, f.ReplayRequest = StatusDead, 0
	where, args := FilterSQL(f)
	return s.countBounded(ctx, lettersWithStatus, append(where, "redacted_at IS NULL"), args, limit)
}

// countBounded counts the rows of from meeting every condition of where,
// stopping at limit.
func (s postgresLetters) countBounded(ctx context.Context, from string, where []string, args []any, limit int) (int, error) {
	sql := "SELECT 1 FROM " + from
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	var n int
	err := s.q.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM (%s LIMIT $%d) bounded", sql, len(args)), args...).Scan(&n)
	return n, err
}

// LetterCountRedeadOf implements letterStore, from the partial index
// dead_letters_replay_request.
func (s postgresLetters) LetterCountRedeadOf(ctx context.Context, requests []int64) (map[int64]int, error) {
	rows, err := s.q.Query(ctx, `SELECT replay_request_id, count(*)::int FROM expiryctl.dead_letters
		WHERE replay_request_id = ANY($1) GROUP BY 1`, requests)
	if err != nil {
		return nil, err
	}
	type count struct {
		request int64
		n       int
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (count, error) {
		var c count
		return c, row.Scan(&c.request, &c.n)
	})
	out := make(map[int64]int, len(counts))
	for _, c := range counts {
		out[c.request] = c.n
	}
	return out, err
}

// LetterCountRedead implements letterStore.
func (s postgresLetters) LetterCountRedead(ctx context.Context, requestID int64) (int, error) {
	var n int
	err := s.q.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, requestID).Scan(&n)
	return n, err
}
