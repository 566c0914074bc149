package audit

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// rawRow is one audit row as it arrives in PostgreSQL's binary format. Its
// slices point into the connection's read buffer and are valid only until
// the next row is read: the export and verify loops use a row and drop it,
// which is what keeps their memory flat however long the trail is.
type rawRow struct {
	seq      int64
	atMicros int64 // since the Unix epoch
	actor    []byte
	dbRole   []byte
	action   []byte
	target   []byte
	details  []byte // details::text
	outcome  []byte
	prevHash []byte
	hash     []byte
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
	// Close drains unread rows; when the loop stopped early the caller
	// cancels ctx, which makes the drain end at once (and discards the
	// connection rather than reading a million unwanted rows).
	_, err := rr.Close()
	if rowErr != nil {
		return rowErr
	}
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
