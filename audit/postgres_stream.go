package audit

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AuditRange implements trailStore. It reads the rows in PostgreSQL's
// binary format straight from the connection (streamRows).
func (s postgresTrail) AuditRange(ctx context.Context, r rowRange, fn func(*rawRow) error) error {
	where, args := filterSQL(r.Filter)
	if r.FromSeq > 0 {
		args = append(args, r.FromSeq)
		where = append(where, fmt.Sprintf("seq >= $%d", len(args)))
	}
	if r.Last != nil {
		where = append(where, "seq <= "+strconv.FormatInt(*r.Last, 10))
	}
	params, err := textParams(args)
	if err != nil {
		return err
	}
	conn, release, err := s.pgConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	return streamRows(ctx, conn, streamSQL(where), params, fn)
}

// pgConn returns the connection under s.q, for reading below pgx's row
// decoding: a pool lends one until release is called.
func (s postgresTrail) pgConn(ctx context.Context) (conn *pgconn.PgConn, release func(), err error) {
	switch q := s.q.(type) {
	case *pgxpool.Pool:
		c, err := q.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Conn().PgConn(), c.Release, nil
	case interface{ Conn() *pgx.Conn }: // a transaction, or a connection of a pool
		return q.Conn().PgConn(), func() {}, nil
	case *pgx.Conn:
		return q.PgConn(), func() {}, nil
	}
	return nil, nil, fmt.Errorf("audit: cannot stream rows over a %T", s.q)
}

// streamSQL selects the chained columns in binary format, oldest first.
// ORDER BY seq walks the unique index on seq, whose order matches the heap's
// (rows are appended in seq order), so it costs little more than a
// sequential scan and needs no sort however many rows there are.
func streamSQL(where []string) string {
	sql := "SELECT " + rowColumns + " FROM expiryctl.audit_log"
	for i, w := range where {
		if i == 0 {
			sql += " WHERE " + w
		} else {
			sql += " AND " + w
		}
	}
	return sql + " ORDER BY seq"
}

// binaryResults asks for every column in binary: int8 and timestamptz as
// 8-byte integers, text as its bytes, bytea raw. Binary needs no parsing, no
// unescaping and no hex decoding, and no session setting (DateStyle,
// TimeZone, bytea_output) can change it.
var binaryResults = []int16{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}

// postgresEpochMicros is 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch,
// in microseconds since the Unix epoch.
const postgresEpochMicros = 946_684_800_000_000

// streamRows runs sql with params (PostgreSQL text format; their types are
// inferred from the query) and calls fn for each row, in order. It reads the
// rows from the socket as they come: nothing is buffered beyond one row.
func streamRows(ctx context.Context, conn *pgconn.PgConn, sql string, params [][]byte, fn func(*rawRow) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rr := conn.ExecParams(ctx, sql, params, nil, nil, binaryResults)
	var (
		r      rawRow
		rowErr error
	)
	for rr.NextRow() {
		if rowErr = decodeRaw(rr.Values(), &r); rowErr != nil {
			break
		}
		if rowErr = fn(&r); rowErr != nil {
			break
		}
	}
	if rowErr != nil {
		// Close would read every row left; cancelling first ends the
		// statement at once. pgconn closes the connection to do so (a pool
		// discards it) rather than read a million unwanted rows.
		cancel()
		_, _ = rr.Close()
		return rowErr
	}
	_, err := rr.Close()
	return err
}

func decodeRaw(v [][]byte, r *rawRow) error {
	if len(v) != 10 || len(v[0]) != 8 || len(v[1]) != 8 {
		return fmt.Errorf("unexpected row shape from expiryctl.audit_log (%d columns)", len(v))
	}
	r.seq = int64(binary.BigEndian.Uint64(v[0]))
	r.atMicros = int64(binary.BigEndian.Uint64(v[1])) + postgresEpochMicros
	r.actor, r.dbRole, r.action, r.target = v[2], v[3], v[4], v[5]
	r.details, r.outcome, r.prevHash, r.hash = v[6], v[7], v[8], v[9]
	return nil
}

// textParams renders filterSQL's arguments in PostgreSQL's text format for
// ExecParams.
func textParams(args []any) ([][]byte, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			params[i] = []byte(v)
		case int64:
			params[i] = strconv.AppendInt(nil, v, 10)
		case int:
			params[i] = strconv.AppendInt(nil, int64(v), 10)
		case time.Time:
			// ISO 8601 with an explicit offset is read the same under every
			// DateStyle and TimeZone.
			params[i] = []byte(v.UTC().Format("2006-01-02T15:04:05.999999Z07:00"))
		default:
			return nil, fmt.Errorf("audit: unsupported query parameter %T", a)
		}
	}
	return params, nil
}
