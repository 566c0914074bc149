package jobtable

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// failedRow is one failed row as rowColumns reads it.
type failedRow struct {
	id, incarnation string
	payload         []byte
	attempts        *int64
	lastError       *string
	history         *string
	status          *string
	due, failedAt   pgtype.Timestamptz
	marks           *string
	kind            *string
	native          []*string
}

func (t *table) scanRow(row pgx.Row) (failedRow, error) {
	var r failedRow
	var payloadText *string
	var payloadTarget any = &payloadText
	if t.payloadBytes {
		payloadTarget = &r.payload
	}
	r.native = make([]*string, len(t.m.Columns.Native))
	targets := []any{&r.id, payloadTarget, &r.attempts, &r.lastError, &r.history, &r.status, &r.due, &r.failedAt, &r.marks, &r.kind, &r.incarnation}
	for i := range r.native {
		targets = append(targets, &r.native[i])
	}
	if err := row.Scan(targets...); err != nil {
		return failedRow{}, err
	}
	if payloadText != nil {
		r.payload = []byte(*payloadText)
	}
	return r, nil
}

// stored is the row as the job the letter contract describes. Nothing in
// a row is reason enough to drop it: what does not decode stays in
// Native as it came, and the payload goes as it is for capture to
// classify.
func (t *table) stored(queue string, r failedRow) deadletter.StoredJob {
	c := t.m.Columns
	j := deadletter.StoredJob{
		System:      System,
		Queue:       queue,
		ID:          r.id,
		Incarnation: r.incarnation,
		Kind:        deref(r.kind),
		Payload:     r.payload,
		LastError:   deref(r.lastError),
		Replay:      pgjobs.Marks([]byte(deref(r.marks))),
		Native:      map[string]string{},
	}
	if r.payload == nil {
		j.Payload = []byte{}
	}
	if r.attempts != nil {
		j.Attempts = int(*r.attempts)
	}
	if at, ok := finite(r.failedAt); ok {
		j.FailedAt = at
	}
	if r.status != nil {
		j.Native[c.Status] = *r.status
	}
	if at, ok := finite(r.due); ok {
		j.Native[c.DueAt] = at.Format(time.RFC3339Nano)
	}
	if r.history != nil {
		errs, ok := history(*r.history)
		if ok {
			j.Errors = errs
		} else {
			j.Native[c.History] = *r.history
		}
	}
	for i, n := range c.Native {
		if r.native[i] != nil {
			j.Native[n] = *r.native[i]
		}
	}
	return j
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// finite is a timestamptz as a time, false when NULL or infinite.
func finite(ts pgtype.Timestamptz) (time.Time, bool) {
	if !ts.Valid || ts.InfinityModifier != pgtype.Finite {
		return time.Time{}, false
	}
	return ts.Time.UTC(), true
}

// historyEntry is one attempt as teams commonly keep it; the alternative
// spellings are the usual ones of Node.js and Python pollers.
type historyEntry struct {
	Error    *string     `json:"error"`
	Message  *string     `json:"message"`
	At       *time.Time  `json:"at"`
	Time     *time.Time  `json:"time"`
	FailedAt *time.Time  `json:"failed_at"`
	Attempt  json.Number `json:"attempt"`
	Trace    string      `json:"trace"`
	Stack    string      `json:"stack"`
}

// history reads a history column: an array of attempts, each an object
// or a bare string. An element that is neither keeps its raw JSON as its
// error text rather than vanishing; a value that is not an array is not
// read (false), and the letter keeps it as a native column.
func history(raw string) ([]deadletter.JobError, bool) {
	var elems []json.RawMessage
	if json.Unmarshal([]byte(raw), &elems) != nil {
		return nil, false
	}
	out := make([]deadletter.JobError, 0, len(elems))
	for _, e := range elems {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out = append(out, deadletter.JobError{Error: s})
			continue
		}
		var h historyEntry
		if json.Unmarshal(e, &h) != nil || (h.Error == nil && h.Message == nil) {
			out = append(out, deadletter.JobError{Error: string(e)})
			continue
		}
		je := deadletter.JobError{Trace: h.Trace}
		if h.Error != nil {
			je.Error = *h.Error
		} else {
			je.Error = *h.Message
		}
		if je.Trace == "" {
			je.Trace = h.Stack
		}
		for _, at := range []*time.Time{h.At, h.Time, h.FailedAt} {
			if at != nil {
				je.At = at.UTC()
				break
			}
		}
		if n, err := strconv.Atoi(h.Attempt.String()); err == nil {
			je.Attempt = n
		}
		out = append(out, je)
	}
	return out, true
}
