package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// VerifyFile verifies an export read from r, with no database: the same
// checks as VerifyDB, on the rows as the file lists them. name is used in
// messages. The format (ndjson, json or csv) is recognised from the first
// bytes, so a renamed file is still read right.
//
// A file holds rows only, no header of its own: what it proves depends on
// how it was made. An unfiltered export is the whole chain from seq 1, and
// every row's hash and link is checked; with the anchor printed when it was
// made, nothing in it can be changed, removed, added or reordered unseen. A
// filtered export jumps over the rows the filter left out: those jumps fail
// verification as gaps unless opts.AllowGaps is set, and then each row is
// checked against its own prev_hash only (see docs/audit.md).
func VerifyFile(ctx context.Context, r io.Reader, name string, opts VerifyOptions) (Result, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	c := newChain(name, opts)
	c.file = true
	format, err := sniff(br)
	if err != nil {
		return Result{}, fmt.Errorf("audit verify %s: %w", name, err)
	}
	var src rowSource
	switch format {
	case NDJSON:
		src = &ndjsonSource{r: br}
	case JSON:
		dec := json.NewDecoder(br)
		dec.DisallowUnknownFields()
		src = &jsonArraySource{dec: dec}
	default:
		src = &csvSource{r: br}
	}
	var row fileRow
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return c.res, err
			}
		}
		err := src.next(&row)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var readErr *readError
			if errors.As(err, &readErr) {
				return c.res, fmt.Errorf("audit verify %s: %w", name, readErr.err)
			}
			return c.res, c.fail(c.lastSeq+1, Malformed, "%s: %v (not an unchanged expiryctl export)", src.position(), err)
		}
		if ce := row.add(c, src.position()); ce != nil {
			if ce.Problem == Gap {
				// Rows swapped in a file look like a gap until the missing
				// row turns up just after: one row of lookahead tells them
				// apart.
				seq := row.Seq
				if err := src.next(&row); err == nil && row.Seq >= ce.Seq && row.Seq < seq {
					return c.res, c.fail(row.Seq, OutOfOrder, "seq %d is listed after seq %d: rows were reordered", row.Seq, seq)
				}
			}
			return c.res, ce
		}
	}
	if ce := c.finish(); ce != nil {
		return c.res, ce
	}
	return c.res, nil
}

// readError is a failure to read the file at all (an I/O error), as opposed
// to content that is not an export.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// SniffFormat says which export format br begins with, without consuming
// it.
func SniffFormat(br *bufio.Reader) (Format, error) { return sniff(br) }

// sniff looks at the first byte that is not a byte-order mark or white
// space: '[' is a JSON array, '{' ndjson, anything else CSV.
func sniff(br *bufio.Reader) (Format, error) {
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		_, _ = br.Discard(3)
	}
	for {
		b, err := br.Peek(1)
		if errors.Is(err, io.EOF) {
			return NDJSON, nil // empty: no rows, whatever the format
		}
		if err != nil {
			return "", err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.Discard(1)
			continue
		case '[':
			return JSON, nil
		case '{':
			return NDJSON, nil
		}
		return CSV, nil
	}
}

// fileRow is one exported row as a file spells it.
type fileRow struct {
	Seq      int64  `json:"seq"`
	At       string `json:"at"`
	Actor    string `json:"actor"`
	DBRole   string `json:"db_role"`
	Action   string `json:"action"`
	Target   string `json:"target"`
	Details  string `json:"details"`
	Outcome  string `json:"outcome"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// add decodes the row's time and hashes and hands it to the chain.
func (r *fileRow) add(c *chain, pos string) *ChainError {
	at, err := parseExportTime(r.At)
	if err != nil {
		return c.fail(r.Seq, Malformed, "%s: %v", pos, err)
	}
	prevHash, err1 := hex.DecodeString(r.PrevHash)
	hash, err2 := hex.DecodeString(r.Hash)
	if err1 != nil || err2 != nil {
		return c.fail(r.Seq, Malformed, "%s: prev_hash and hash must be hex", pos)
	}
	return add(c, r.Seq, at, r.Actor, r.DBRole, r.Action, r.Target, r.Details, r.Outcome, prevHash, hash)
}

// rowSource reads one format's rows.
type rowSource interface {
	// next fills row with the next row, returns io.EOF after the last, a
	// *readError when the file cannot be read, and another error when its
	// content is not an export.
	next(row *fileRow) error
	// position names where the last row was read, for messages.
	position() string
}

type ndjsonSource struct {
	r    *bufio.Reader
	line int
	buf  []byte
}

func (s *ndjsonSource) position() string { return "line " + strconv.Itoa(s.line) }

func (s *ndjsonSource) next(row *fileRow) error {
	for {
		line, err := readLine(s.r, &s.buf)
		if len(line) == 0 && errors.Is(err, io.EOF) {
			return io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return &readError{err}
		}
		s.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var proof []byte
		if parseExportedRow(line, row, &proof) && proof == nil {
			return nil
		}
		*row = fileRow{}
		return decodeStrict(line, row)
	}
}

// readLine returns the next line without its LF (or CRLF), however long:
// a line holds one row, and one row's details may be large.
func readLine(r *bufio.Reader, buf *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		*buf = append((*buf)[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.ReadSlice('\n')
			*buf = append(*buf, line...)
		}
		line = *buf
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, err
}

// decodeStrict decodes one JSON object, refusing fields an export does not
// have: a field the hash does not cover must not ride along looking as if it
// were verified.
func decodeStrict(b []byte, row *fileRow) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(row); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

type jsonArraySource struct {
	dec     *json.Decoder
	started bool
	n       int
}

func (s *jsonArraySource) position() string { return "element " + strconv.Itoa(s.n) }

func (s *jsonArraySource) next(row *fileRow) error {
	if !s.started {
		s.started = true
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		if tok != json.Delim('[') {
			return errors.New("a JSON export is one array")
		}
	}
	if !s.dec.More() {
		tok, err := s.dec.Token()
		if errors.Is(err, io.EOF) {
			return errors.New("the JSON array is not closed")
		}
		if err != nil {
			return err
		}
		if tok != json.Delim(']') {
			return errors.New("a JSON export is one array")
		}
		if _, err := s.dec.Token(); !errors.Is(err, io.EOF) {
			return errors.New("content after the array")
		}
		return io.EOF
	}
	s.n++
	*row = fileRow{}
	return s.dec.Decode(row)
}

// csvSource reads RFC 4180 exactly: encoding/csv would turn CRLF inside a
// quoted field into LF, changing the bytes the hash covers.
type csvSource struct {
	r      *bufio.Reader
	lines  int // lines read so far
	start  int // line where the current record starts
	header bool
	fields [][]byte
}

func (s *csvSource) position() string { return "line " + strconv.Itoa(s.start) }

func (s *csvSource) next(row *fileRow) error {
	if !s.header {
		s.header = true
		rec, err := s.record()
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if err != nil {
			return err
		}
		if len(rec) != len(ExportFields) {
			return fmt.Errorf("the header has %d fields, want %d", len(rec), len(ExportFields))
		}
		for i, f := range rec {
			if string(f) != ExportFields[i] {
				return fmt.Errorf("header field %d is %q, want %q", i+1, f, ExportFields[i])
			}
		}
	}
	for {
		rec, err := s.record()
		if err != nil {
			return err
		}
		if len(rec) == 1 && len(rec[0]) == 0 {
			continue // a blank line
		}
		if len(rec) != len(ExportFields) {
			return fmt.Errorf("%d fields, want %d", len(rec), len(ExportFields))
		}
		seq, err := strconv.ParseInt(string(rec[0]), 10, 64)
		if err != nil {
			return fmt.Errorf("seq %q is not a number", rec[0])
		}
		*row = fileRow{Seq: seq, At: string(rec[1]), Actor: string(rec[2]), DBRole: string(rec[3]), Action: string(rec[4]),
			Target: string(rec[5]), Details: string(rec[6]), Outcome: string(rec[7]), PrevHash: string(rec[8]), Hash: string(rec[9])}
		return nil
	}
}

// record reads one CSV record. It returns io.EOF only at the end of input
// before any byte of a record.
func (s *csvSource) record() ([][]byte, error) {
	for i := range s.fields {
		s.fields[i] = s.fields[i][:0]
	}
	s.fields = s.fields[:0]
	s.lines++
	s.start = s.lines
	first := true
	for {
		field, end, err := s.field(first)
		if err != nil {
			return nil, err
		}
		first = false
		s.fields = append(s.fields, field)
		if end {
			return s.fields, nil
		}
	}
}

// field reads one field and says whether it ended its record.
func (s *csvSource) field(first bool) (field []byte, end bool, err error) {
	idx := len(s.fields)
	if idx < cap(s.fields) {
		field = s.fields[:idx+1][idx][:0]
	}
	c, err := s.r.ReadByte()
	if errors.Is(err, io.EOF) {
		if first {
			return nil, true, io.EOF
		}
		return field, true, nil
	}
	if err != nil {
		return nil, true, &readError{err}
	}
	if c != '"' {
		// Unquoted: up to a comma or the end of the line.
		for {
			switch c {
			case ',':
				return field, false, nil
			case '\n':
				return bytes.TrimSuffix(field, []byte("\r")), true, nil
			}
			field = append(field, c)
			if c, err = s.r.ReadByte(); errors.Is(err, io.EOF) {
				return field, true, nil
			} else if err != nil {
				return nil, true, &readError{err}
			}
		}
	}
	// Quoted: everything up to a quote not followed by another quote.
	for {
		c, err := s.r.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil, true, errors.New("a quoted field is not closed")
		}
		if err != nil {
			return nil, true, &readError{err}
		}
		if c == '\n' {
			s.lines++
		}
		if c != '"' {
			field = append(field, c)
			continue
		}
		next, err := s.r.ReadByte()
		switch {
		case errors.Is(err, io.EOF):
			return field, true, nil
		case err != nil:
			return nil, true, &readError{err}
		case next == '"':
			field = append(field, '"')
		case next == ',':
			return field, false, nil
		case next == '\n':
			return field, true, nil
		case next == '\r':
			if b, err := s.r.ReadByte(); err == nil && b == '\n' {
				return field, true, nil
			}
			return nil, true, errors.New("a quoted field is followed by CR without LF")
		default:
			return nil, true, fmt.Errorf("unexpected %q after a quoted field", next)
		}
	}
}
