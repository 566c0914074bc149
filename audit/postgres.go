package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/expiryctl/expiryctl/store"
)

// postgresTrail is the PostgreSQL trailStore. Over a pool each method runs
// on its own; over a transaction its statements are part of the caller's.
// Streaming (AuditRange) is in postgres_stream.go.
type postgresTrail struct {
	q store.Querier
}

// newPostgresTrail returns the trailStore over q: a pool, a connection or
// a transaction.
func newPostgresTrail(q store.Querier) trailStore { return postgresTrail{q: q} }

// AuditAppend implements trailStore. It uses QueryExecModeExec: one round
// trip. A command writes one audit row, so preparing the statement first
// would only add a round trip to every command. Parameters and results then
// travel as text: the details are sent as JSON text, and the hash comes back
// as hex, whatever the session's bytea_output.
func (s postgresTrail) AuditAppend(ctx context.Context, actor, action, target string, details []byte, outcome Outcome) (int64, string, error) {
	var seq int64
	var hash string
	err := s.q.QueryRow(ctx, `SELECT seq, hash FROM expiryctl.audit_append($1, $2, $3, $4::jsonb, $5)`,
		pgx.QueryExecModeExec, actor, action, target, string(details), string(outcome)).Scan(&seq, &hash)
	if err != nil {
		return 0, "", chainLockError(ctx, s.q, store.AsRefusal(err))
	}
	return seq, hash, nil
}

// chainLockError names who holds the trail's append lock when err is the
// bounded wait for it running out (lock_timeout, SQLSTATE 55P03): only a
// transaction that appended holds it, so its session is someone's
// audited transaction left open. Read through q when q can still read (a
// pool; an aborted transaction cannot), else err as it came.
func chainLockError(ctx context.Context, q store.Querier, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		return err
	}
	var pid int32
	var login, application string
	if qerr := q.QueryRow(context.WithoutCancel(ctx), `SELECT l.pid, coalesce(a.usename::text, ''), coalesce(a.application_name, '')
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'relation' AND l.granted AND l.relation = 'expiryctl.audit_chain'::regclass
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		LIMIT 1`).Scan(&pid, &login, &application); qerr != nil {
		return fmt.Errorf("the audit trail's append lock is held by another session past its wait: %w", err)
	}
	return fmt.Errorf("the audit trail's append lock is held by PostgreSQL backend %d of login %s (%q), a transaction that appended and has not ended: "+
		"ask its owner to end it, or a DBA to end the backend (SELECT pg_terminate_backend(%d)): %w", pid, login, application, pid, err)
}

// rowColumns are a Row's columns, in the order scanRow and decodeRaw read
// them.
const rowColumns = `seq, at, actor, db_role, action, target, details::text, outcome, prev_hash, hash`

// AuditList implements trailStore. It pages by keyset on seq, so a page
// deep in a large trail costs what the first page costs.
func (s postgresTrail) AuditList(ctx context.Context, p auditListParams) ([]Row, error) {
	where, args := filterSQL(p.Filter)
	if p.After != nil {
		args = append(args, p.After.Seq)
		where = append(where, fmt.Sprintf("seq < $%d", len(args)))
	}
	sql := "SELECT " + rowColumns + " FROM expiryctl.audit_log"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, p.Limit)
	sql += fmt.Sprintf(" ORDER BY seq DESC LIMIT $%d", len(args))

	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRow)
}

func scanRow(row pgx.CollectableRow) (Row, error) {
	var (
		r              Row
		details        string
		prevHash, hash []byte
	)
	if err := row.Scan(&r.Seq, &r.At, &r.Actor, &r.DBRole, &r.Action, &r.Target, &details, &r.Outcome, &prevHash, &hash); err != nil {
		return Row{}, err
	}
	r.At = r.At.UTC()
	r.Details = json.RawMessage(details)
	// A stored hash of the wrong length (only a tampered row has one) is
	// shown zero-padded here; `audit verify` reports it.
	copy(r.PrevHash[:], prevHash)
	copy(r.Hash[:], hash)
	return r, nil
}

// filterSQL builds only the conditions f sets, so each query gets a plan for
// exactly its filter rather than a generic plan full of "IS NULL OR".
func filterSQL(f Filter) ([]string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if !f.Since.IsZero() {
		add("at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("at < $%d", f.Until)
	}
	if f.Actor != "" {
		add("actor = $%d", f.Actor)
	}
	if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if f.Target != "" {
		add("target = $%d", f.Target)
	}
	if f.ThroughSeq > 0 {
		add("seq <= $%d", f.ThroughSeq)
	}
	return where, args
}

// AuditSeqs implements trailStore.
func (s postgresTrail) AuditSeqs(ctx context.Context, f Filter) ([]int64, error) {
	where, args := filterSQL(f)
	sql := "SELECT seq FROM expiryctl.audit_log"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.q.Query(ctx, sql+" ORDER BY seq", args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// AuditLastSeq implements trailStore.
func (s postgresTrail) AuditLastSeq(ctx context.Context) (int64, error) {
	var last int64
	err := s.q.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM expiryctl.audit_log`).Scan(&last)
	return last, err
}

// AuditHashAt implements trailStore.
func (s postgresTrail) AuditHashAt(ctx context.Context, seq int64) ([]byte, bool, error) {
	var hash []byte
	err := s.q.QueryRow(ctx, `SELECT hash FROM expiryctl.audit_log WHERE seq = $1 LIMIT 1`, seq).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return hash, err == nil, err
}

// AuditHashes implements trailStore.
func (s postgresTrail) AuditHashes(ctx context.Context, afterSeq int64, limit int, fn func(seq int64, hash []byte) error) error {
	rows, err := s.q.Query(ctx, `SELECT seq, hash FROM expiryctl.audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`, afterSeq, limit)
	if err != nil {
		return err
	}
	return eachHash(rows, fn)
}

// eachHash calls fn with the two columns (a number and a hash) of each of
// rows, and closes them.
func eachHash(rows pgx.Rows, fn func(int64, []byte) error) error {
	defer rows.Close()
	for rows.Next() {
		var n int64
		var h []byte
		if err := rows.Scan(&n, &h); err != nil {
			return err
		}
		if err := fn(n, h); err != nil {
			return err
		}
	}
	return rows.Err()
}

// AuditEvents implements trailStore.
func (s postgresTrail) AuditEvents(ctx context.Context, actions []string) ([]Event, error) {
	rows, err := s.q.Query(ctx, `SELECT seq, action, target, actor, db_role, details::text FROM expiryctl.audit_log
		WHERE outcome = 'ok' AND action = ANY ($1) ORDER BY seq`, actions)
	if err != nil {
		return nil, fmt.Errorf("read the trail's governance events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var details string
		if err := rows.Scan(&e.Seq, &e.Action, &e.Target, &e.Actor, &e.DBRole, &details); err != nil {
			return nil, fmt.Errorf("read the trail's governance events: %w", err)
		}
		e.Details = json.RawMessage(details)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditEventCounts implements trailStore.
func (s postgresTrail) AuditEventCounts(ctx context.Context, action, detailKey string) (map[string]int64, error) {
	rows, err := s.q.Query(ctx, `SELECT coalesce(details->>$2, ''), count(*) FROM expiryctl.audit_log
		WHERE action = $1 AND outcome = 'ok' GROUP BY 1`, action, detailKey)
	if err != nil {
		return nil, fmt.Errorf("count the trail's %s events: %w", action, err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var value string
		var n int64
		if err := rows.Scan(&value, &n); err != nil {
			return nil, fmt.Errorf("count the trail's %s events: %w", action, err)
		}
		counts[value] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count the trail's %s events: %w", action, err)
	}
	return counts, nil
}

// TrailGet implements trailStore.
func (s postgresTrail) TrailGet(ctx context.Context) (string, int64, error) {
	var origin string
	var size int64
	err := s.q.QueryRow(ctx, `SELECT coalesce(origin, ''), tree_size FROM expiryctl.audit_trail WHERE singleton`).Scan(&origin, &size)
	return origin, size, err
}

// TreeHashes implements trailStore.
func (s postgresTrail) TreeHashes(ctx context.Context, indexes []int64, fn func(int64, []byte) error) error {
	rows, err := s.q.Query(ctx, `SELECT idx, hash FROM expiryctl.audit_tree WHERE idx = ANY($1)`, indexes)
	if err != nil {
		return err
	}
	return eachHash(rows, fn)
}

// TreeHashesBelow implements trailStore.
func (s postgresTrail) TreeHashesBelow(ctx context.Context, count int64, fn func(int64, []byte) error) error {
	rows, err := s.q.Query(ctx, `SELECT idx, hash FROM expiryctl.audit_tree WHERE idx < $1 ORDER BY idx`, count)
	if err != nil {
		return err
	}
	return eachHash(rows, fn)
}

// TreeExtend implements trailStore.
func (s postgresTrail) TreeExtend(ctx context.Context, oldSize int64, batch int) (int64, error) {
	var size int64
	err := s.q.QueryRow(ctx, `SELECT expiryctl.audit_tree_extend($1, $2)`, oldSize, batch).Scan(&size)
	return size, store.AsRefusal(err)
}

// CheckpointLatest implements trailStore.
func (s postgresTrail) CheckpointLatest(ctx context.Context) ([]byte, error) {
	var msg string
	err := s.q.QueryRow(ctx, `SELECT signed_note FROM expiryctl.audit_checkpoints ORDER BY id DESC LIMIT 1`).Scan(&msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(msg), nil
}

// CountsSize implements trailStore.
func (s postgresTrail) CountsSize(ctx context.Context) (int64, error) {
	var size int64
	err := s.q.QueryRow(ctx, `SELECT counts_size FROM expiryctl.audit_trail WHERE singleton`).Scan(&size)
	return size, err
}

// CountLeaves implements trailStore.
func (s postgresTrail) CountLeaves(ctx context.Context, buckets []int, fn func(int, CountLeaf) error) error {
	rows, err := s.q.Query(ctx, `SELECT bucket, field, value, rows, newest FROM expiryctl.audit_count_leaves WHERE bucket = ANY($1)`, buckets)
	if err != nil {
		return err
	}
	defer rows.Close()
	var b int
	var l CountLeaf
	for rows.Next() {
		if err := rows.Scan(&b, &l.Field, &l.Value, &l.Count, &l.Newest); err != nil {
			return err
		}
		if err := fn(b, l); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CountNodes implements trailStore.
func (s postgresTrail) CountNodes(ctx context.Context, nodes []countNode, fn func(countNode, []byte) error) error {
	levels, ns := make([]int32, len(nodes)), make([]int32, len(nodes))
	for i, n := range nodes {
		levels[i], ns[i] = int32(n.level), int32(n.n)
	}
	rows, err := s.q.Query(ctx, `SELECT t.level, t.n, t.hash FROM expiryctl.audit_count_tree t
		JOIN unnest($1::int[], $2::int[]) AS wanted(level, n) ON t.level = wanted.level AND t.n = wanted.n`, levels, ns)
	if err != nil {
		return err
	}
	defer rows.Close()
	var node countNode
	var hash []byte
	for rows.Next() {
		if err := rows.Scan(&node.level, &node.n, &hash); err != nil {
			return err
		}
		if err := fn(node, hash); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CountsExtend implements trailStore.
func (s postgresTrail) CountsExtend(ctx context.Context, newSize int64) ([]byte, error) {
	var root []byte
	err := s.q.QueryRow(ctx, `SELECT expiryctl.audit_counts_extend($1)`, newSize).Scan(&root)
	return root, store.AsRefusal(err)
}

// CheckpointNotes implements trailStore.
func (s postgresTrail) CheckpointNotes(ctx context.Context, limit int) ([][]byte, error) {
	rows, err := s.q.Query(ctx, `SELECT convert_to(signed_note, 'UTF8') FROM expiryctl.audit_checkpoints ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}

// AuditCounts implements trailStore. Each field's count is an aggregate
// over its index on (field, seq), which holds every value: an index-only
// scan of the trail, three times.
func (s postgresTrail) AuditCounts(ctx context.Context, size int64, fn func(CountLeaf) error) error {
	var parts []string
	for _, field := range CountFields {
		parts = append(parts, fmt.Sprintf(`SELECT '%[1]s', %[1]s, count(*), max(seq) FROM expiryctl.audit_log WHERE seq <= $1 GROUP BY %[1]s`, field))
	}
	rows, err := s.q.Query(ctx, strings.Join(parts, " UNION ALL "), size)
	if err != nil {
		return err
	}
	defer rows.Close()
	var l CountLeaf
	for rows.Next() {
		if err := rows.Scan(&l.Field, &l.Value, &l.Count, &l.Newest); err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CheckpointCover implements trailStore.
func (s postgresTrail) CheckpointCover(ctx context.Context) (CoverStatus, error) {
	var st CoverStatus
	var at *time.Time
	err := s.q.QueryRow(ctx, `SELECT coalesce((SELECT max(seq) FROM expiryctl.audit_log), 0),
		coalesce(c.tree_size, 0), c.created_at
		FROM (SELECT 1) AS one LEFT JOIN (SELECT tree_size, created_at FROM expiryctl.audit_checkpoints ORDER BY id DESC LIMIT 1) AS c ON true`).
		Scan(&st.Rows, &st.Checkpointed, &at)
	if at != nil {
		st.NewestCheckpoint = *at
	}
	return st, err
}

// CheckpointSizesBelow implements trailStore.
func (s postgresTrail) CheckpointSizesBelow(ctx context.Context, size int64, limit int) ([]int64, error) {
	rows, err := s.q.Query(ctx, `SELECT DISTINCT tree_size FROM expiryctl.audit_checkpoints
		WHERE tree_size < $1 ORDER BY tree_size DESC LIMIT $2`, size, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// CheckpointRecord implements trailStore.
func (s postgresTrail) CheckpointRecord(ctx context.Context, actor string, head TreeHead, note []byte) error {
	_, err := s.q.Exec(ctx, `SELECT expiryctl.audit_checkpoint_record($1, $2, $3, $4)`,
		actor, head.Size, head.Root[:], string(note))
	return store.AsRefusal(err)
}

// InTx implements trailStore.
func (s postgresTrail) InTx(ctx context.Context, fn func(trailStore) error) error {
	db, ok := s.q.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return fmt.Errorf("audit: cannot begin a transaction on a %T", s.q)
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return fn(postgresTrail{q: tx}) })
}

// Snapshot implements trailStore. It needs a pool or a connection: a
// transaction already has its own isolation level.
func (s postgresTrail) Snapshot(ctx context.Context, fn func(trailStore) error) error {
	db, ok := s.q.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	})
	if !ok {
		return fmt.Errorf("audit: cannot begin a read-only snapshot on a %T", s.q)
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to keep or lose
	return fn(postgresTrail{q: tx})
}

// AuditCanaryPassed implements trailStore.
func (s postgresTrail) AuditCanaryPassed(ctx context.Context, target string, approval int) (bool, error) {
	var passed bool
	err := s.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM expiryctl.audit_log WHERE target = $1
		AND action = 'replay.canary.pass' AND outcome = 'ok' AND (details->>'approval')::int = $2)`, target, approval).Scan(&passed)
	return passed, err
}

// AuditCanaryStarted implements trailStore.
func (s postgresTrail) AuditCanaryStarted(ctx context.Context, target string, approval int) (*time.Duration, error) {
	var waited float64
	err := s.q.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - at)::float8 FROM expiryctl.audit_log
		WHERE target = $1 AND action = 'replay.canary.start' AND outcome = 'ok' AND (details->>'approval')::int = $2
		ORDER BY seq DESC LIMIT 1`, target, approval).Scan(&waited)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	d := time.Duration(waited * float64(time.Second))
	return &d, nil
}
