package audit

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Format is an export file format. Every format carries the same ten fields
// in the same order (see ExportFields) with the same text, so any of them can
// be verified offline.
type Format string

// The export formats.
const (
	// NDJSON is one JSON object per line: streamable, greppable, and what
	// `audit export` writes unless told otherwise.
	NDJSON Format = "ndjson"
	// JSON is one JSON array of those objects, one element per line.
	JSON Format = "json"
	// CSV is RFC 4180 with a header line; fields holding a comma, a quote,
	// CR or LF are quoted, and nothing else is changed.
	CSV Format = "csv"
)

// Formats lists the export formats, for flag help and completion.
func Formats() []Format { return []Format{NDJSON, JSON, CSV} }

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("invalid export format %q: use ndjson, json or csv", s)
}

// ExportFields are the fields of every exported row, in order: the CSV header
// and the JSON keys.
//
//	seq        integer   position in the chain, from 1, no gaps
//	at         string    RFC 3339, UTC, exactly 6 fractional digits
//	actor      string
//	db_role    string
//	action     string
//	target     string
//	details    string    the exact text of details::text (a JSON document
//	                     carried as a string, so that no JSON re-serialiser
//	                     stands between the file and the hash)
//	outcome    string
//	prev_hash  string    64 lowercase hex digits
//	hash       string    64 lowercase hex digits
var ExportFields = []string{"seq", "at", "actor", "db_role", "action", "target", "details", "outcome", "prev_hash", "hash"}

// ExportResult says what an export wrote.
type ExportResult struct {
	// Rows is the number of rows written.
	Rows int64
	// Head is the last row written (zero when none): for an unfiltered
	// export, the anchor to keep.
	Head Anchor
}

// Export writes the rows matching f to w in format, oldest (seq 1) first. It
// streams: the database sends rows as it reads them and each is written as
// it arrives, so memory stays flat for millions of rows.
//
// Export does not write an audit row itself; `audit export` records
// `audit.export` before it starts, with ThroughSeq set to that row's seq.
func Export(ctx context.Context, pool *pgxpool.Pool, w io.Writer, format Format, f Filter) (ExportResult, error) {
	enc, err := newEncoder(format)
	if err != nil {
		return ExportResult{}, err
	}
	// Cancelling on the way out ends the query at once if writing failed
	// half-way (a closed pipe, a full disk) instead of draining the rest.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	bw := bufio.NewWriterSize(w, 256<<10)
	var res ExportResult
	if _, err := bw.Write(enc.header()); err != nil {
		return res, fmt.Errorf("audit export: %w", err)
	}
	err = newPostgresTrail(pool).AuditRange(ctx, rowRange{Filter: f}, func(r *rawRow) error {
		if _, err := bw.Write(enc.row(r, res.Rows == 0)); err != nil {
			return err
		}
		res.Rows++
		res.Head.Seq = r.seq
		copy(res.Head.Hash[:], r.hash)
		return nil
	})
	if err != nil {
		cancel()
		return res, fmt.Errorf("audit export: %w", err)
	}
	if _, err := bw.Write(enc.footer(res.Rows == 0)); err != nil {
		return res, fmt.Errorf("audit export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return res, fmt.Errorf("audit export: %w", err)
	}
	return res, nil
}

// encoder formats rows by hand into one reused buffer. encoding/json and
// encoding/csv would allocate per row and per field, which at a million rows
// is what separates keeping up with PostgreSQL from falling behind it.
type encoder struct {
	format Format
	buf    []byte
}

func newEncoder(format Format) (*encoder, error) {
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, err
	}
	return &encoder{format: format, buf: make([]byte, 0, 4096)}, nil
}

func (e *encoder) header() []byte {
	switch e.format {
	case CSV:
		return []byte("seq,at,actor,db_role,action,target,details,outcome,prev_hash,hash\n")
	case JSON:
		return []byte("[")
	}
	return nil
}

func (e *encoder) footer(empty bool) []byte {
	if e.format != JSON {
		return nil
	}
	if empty {
		return []byte("]\n")
	}
	return []byte("\n]\n")
}

func (e *encoder) row(r *rawRow, first bool) []byte {
	b := e.buf[:0]
	switch e.format {
	case CSV:
		b = strconv.AppendInt(b, r.seq, 10)
		b = append(b, ',')
		b = appendTime(b, r.atMicros)
		for _, field := range [...][]byte{r.actor, r.dbRole, r.action, r.target, r.details, r.outcome} {
			b = append(b, ',')
			b = appendCSVField(b, field)
		}
		b = append(b, ',')
		b = hex.AppendEncode(b, r.prevHash)
		b = append(b, ',')
		b = hex.AppendEncode(b, r.hash)
		b = append(b, '\n')
	default:
		if e.format == JSON {
			if first {
				b = append(b, '\n')
			} else {
				b = append(b, ",\n"...)
			}
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, r.seq, 10)
		b = append(b, `,"at":"`...)
		b = appendTime(b, r.atMicros)
		b = append(b, `","actor":`...)
		b = appendJSONString(b, r.actor)
		b = append(b, `,"db_role":`...)
		b = appendJSONString(b, r.dbRole)
		b = append(b, `,"action":`...)
		b = appendJSONString(b, r.action)
		b = append(b, `,"target":`...)
		b = appendJSONString(b, r.target)
		b = append(b, `,"details":`...)
		b = appendJSONString(b, r.details)
		b = append(b, `,"outcome":`...)
		b = appendJSONString(b, r.outcome)
		b = append(b, `,"prev_hash":"`...)
		b = hex.AppendEncode(b, r.prevHash)
		b = append(b, `","hash":"`...)
		b = hex.AppendEncode(b, r.hash)
		b = append(b, `"}`...)
		if e.format == NDJSON {
			b = append(b, '\n')
		}
	}
	if cap(b) <= 1<<20 {
		// Keep the buffer for the next row, unless one huge details value
		// grew it: that one is left to the garbage collector.
		e.buf = b
	}
	return b
}

// appendTime writes micros (since the Unix epoch) as
// 2006-01-02T15:04:05.000000Z. Digits are appended by hand: time.AppendFormat
// is general and several times slower, which shows at a million rows.
func appendTime(b []byte, micros int64) []byte {
	t := time.UnixMicro(micros).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		// Never written by the database; only a tampered row gets here.
		return t.AppendFormat(b, timeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

func appendDigits(b []byte, v, width int) []byte {
	var tmp [8]byte
	for i := width - 1; i >= 0; i-- {
		tmp[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, tmp[:width]...)
}

// jsonPlain marks the bytes that go into a JSON string unchanged: everything
// but control characters, the quote and the backslash. Bytes of multi-byte
// UTF-8 sequences are plain; PostgreSQL guarantees the text is valid UTF-8.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string. Any JSON parser turns it
// back into exactly s.
func appendJSONString(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if jsonPlain[c] {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			const hexDigits = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCSVField appends s as an RFC 4180 field: quoted, with quotes
// doubled, when it holds a comma, a quote, CR or LF (or is exactly `\.`,
// which PostgreSQL's COPY … CSV would read as end of data); unchanged
// otherwise.
func appendCSVField(b, s []byte) []byte {
	quote := len(s) == 2 && s[0] == '\\' && s[1] == '.'
	for _, c := range s {
		if c == ',' || c == '"' || c == '\r' || c == '\n' {
			quote = true
			break
		}
	}
	if !quote {
		return append(b, s...)
	}
	b = append(b, '"')
	start := 0
	for i, c := range s {
		if c == '"' {
			b = append(b, s[start:i+1]...)
			b = append(b, '"')
			start = i + 1
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
