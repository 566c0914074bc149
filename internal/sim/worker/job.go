package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Job is one reservation-expiry command, decoded from a message body.
type Job struct {
	// ReservationID names the reservation to expire.
	ReservationID string
	// ExpectedVersion is the reservation version the producer saw when it
	// issued the job; any other version means the hold changed since.
	ExpectedVersion int64
	// HoldUntil is the business deadline the job acts on.
	HoldUntil time.Time
	// IdempotencyKey makes a repeated delivery of the same command a no-op.
	IdempotencyKey string
	// Attempt is the producer's own attempt counter. The worker's retry
	// budget does not use it: the body is the job's identity and the worker
	// never rewrites it, so the budget counts x-attempt-history instead.
	Attempt int
	// NotBefore is the optional earliest processing time: the reference
	// worker puts a job back, unprocessed, until then.
	NotBefore *time.Time
}

// DecodeJob parses a message body in either spelling of the contract
// (snake_case or camelCase). A body that is not a JSON object yields a
// *JobError of class ClassMalformed; a JSON object with missing or mistyped
// fields yields class ClassValidation, naming every problem at once so that
// whoever fixes the producer sees the whole list.
func DecodeJob(body []byte) (Job, error) {
	var fields map[string]json.RawMessage
	if !json.Valid(body) || json.Unmarshal(body, &fields) != nil || fields == nil {
		return Job{}, &JobError{Class: ClassMalformed, Permanent: true, Err: errors.New(describeUndecodable(body))}
	}

	d := jobDecoder{fields: fields}
	job := Job{
		ReservationID:  d.text(true, "reservation_id", "reservationId"),
		IdempotencyKey: d.text(true, "idempotency_key", "idempotencyKey"),
	}
	if v, ok := d.integer(true, "expected_version", "expectedVersion"); ok {
		job.ExpectedVersion = v
	}
	if t, ok := d.time(true, "hold_until", "holdUntil"); ok {
		job.HoldUntil = t
	}
	if v, ok := d.integer(false, "attempt", "attempt"); ok {
		job.Attempt = int(v)
	}
	if t, ok := d.time(false, "not_before", "notBefore"); ok {
		job.NotBefore = &t
	}
	if len(d.problems) > 0 {
		return Job{}, permanent(ClassValidation, "invalid expiry job: %s", strings.Join(d.problems, "; "))
	}
	return job, nil
}

func describeUndecodable(body []byte) string {
	switch {
	case len(body) == 0:
		return "empty body"
	case !utf8.Valid(body):
		return fmt.Sprintf("body is not JSON: %d bytes of binary data", len(body))
	default:
		return fmt.Sprintf("body is not a JSON object (%d bytes)", len(body))
	}
}

// jobDecoder collects field problems instead of stopping at the first.
type jobDecoder struct {
	fields   map[string]json.RawMessage
	problems []string
}

// lookup finds a field under either spelling. Both present with different
// values is an error: silently preferring one would process a job its
// producer did not mean.
func (d *jobDecoder) lookup(required bool, snake, camel string) (json.RawMessage, string, bool) {
	s, sOK := d.present(snake)
	c, cOK := d.present(camel)
	switch {
	case sOK && cOK && snake != camel && !bytes.Equal(bytes.TrimSpace(s), bytes.TrimSpace(c)):
		d.problems = append(d.problems, fmt.Sprintf("%s and %s disagree", snake, camel))
		return nil, "", false
	case sOK:
		return s, snake, true
	case cOK:
		return c, camel, true
	}
	if required {
		d.problems = append(d.problems, "missing "+snake)
	}
	return nil, "", false
}

func (d *jobDecoder) present(name string) (json.RawMessage, bool) {
	raw, ok := d.fields[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, false
	}
	return raw, true
}

func (d *jobDecoder) text(required bool, snake, camel string) string {
	raw, name, ok := d.lookup(required, snake, camel)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.problems = append(d.problems, fmt.Sprintf("%s must be a string, got %s", name, excerpt(raw)))
		return ""
	}
	if strings.TrimSpace(s) == "" {
		d.problems = append(d.problems, name+" is empty")
		return ""
	}
	return s
}

// integer accepts a JSON number or a string of digits: Node.js producers
// sometimes serialise 64-bit versions as strings to keep their precision.
func (d *jobDecoder) integer(required bool, snake, camel string) (int64, bool) {
	raw, name, ok := d.lookup(required, snake, camel)
	if !ok {
		return 0, false
	}
	text := string(bytes.TrimSpace(raw))
	if unquoted, err := strconv.Unquote(text); err == nil && strings.HasPrefix(text, `"`) {
		text = unquoted
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || v < 0 {
		d.problems = append(d.problems, fmt.Sprintf("%s must be a non-negative integer, got %s", name, excerpt(raw)))
		return 0, false
	}
	return v, true
}

func (d *jobDecoder) time(required bool, snake, camel string) (time.Time, bool) {
	raw, name, ok := d.lookup(required, snake, camel)
	if !ok {
		return time.Time{}, false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.problems = append(d.problems, fmt.Sprintf("%s must be an RFC 3339 time string, got %s", name, excerpt(raw)))
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.problems = append(d.problems, fmt.Sprintf("%s must be an RFC 3339 time, got %s", name, excerpt(raw)))
		return time.Time{}, false
	}
	return t, true
}

// excerpt quotes at most a short prefix of a value, because the error text
// travels in a header and a producer bug can put anything in a field.
func excerpt(raw json.RawMessage) string {
	const limit = 40
	s := string(bytes.TrimSpace(raw))
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}
