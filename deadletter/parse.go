package deadletter

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// MaxDecodedPayload is the payload size, in bytes, from which Parse no longer
// decodes the body and calls it malformed. An expiry job is a few hundred
// bytes; a megabyte is a producer bug, and decoding it for every redelivery
// would only slow capture down. The payload is still stored whole.
const MaxDecodedPayload = 1 << 20

// The headers Parse interprets. Any other header is kept in Letter.Headers
// and otherwise ignored.
const (
	headerErrorClass       = "x-error-class"
	headerLastError        = "x-last-error"
	headerAttemptHistory   = "x-attempt-history"
	headerOriginalExchange = "x-original-exchange"
	headerOriginalRouting  = "x-original-routing-key"
	headerDeath            = "x-death"
	headerDeliveryCount    = "x-delivery-count"
	headerFirstDeathQueue  = "x-first-death-queue"
	headerReplayRequest    = "x-replay-request"
	headerReplayCount      = "x-replay-count"
	// headerOriginalQueue names, on a letter from SQS that a worker sent to
	// the DLQ itself, the queue the job came from: SQS's own redrive says
	// it in the DeadLetterQueueSourceArn system attribute instead.
	headerOriginalQueue = "x-original-queue"
)

// The SQS system attributes Parse reads from Message.Native.
const (
	sqsReceiveCount    = "ApproximateReceiveCount"
	sqsSourceArn       = "DeadLetterQueueSourceArn"
	sqsGroupID         = "MessageGroupId"
	sqsDeduplicationID = "MessageDeduplicationId"
)

// sqsRedrive is the dead-lettering SQS's own redrive policy did, in
// RabbitMQ's terms: a delivery limit reached after the receives SQS
// counted, in the queue DeadLetterQueueSourceArn names, or else the one
// queue that redrives to the DLQ. A letter that a worker sent to the DLQ
// itself says why in its attributes and gets none: its receive count is
// the DLQ's, not the job's attempts.
func sqsRedrive(m Message) []Death {
	if _, ok := m.Headers[headerErrorClass]; ok {
		return []Death{}
	}
	if _, ok := m.Headers[headerAttemptHistory]; ok {
		return []Death{}
	}
	receives, ok := parseInteger(m.Native[sqsReceiveCount])
	if !ok {
		return []Death{}
	}
	queue := SafeText(m.Native[sqsSourceArn])
	if queue == "" {
		queue = SafeText(m.RedriveSource)
	}
	return []Death{{Count: receives, Reason: "delivery_limit", Queue: queue, RoutingKeys: []string{}}}
}

// encodeNative is a system's own attributes as the archive stores them: a
// JSON object of texts, keys sorted; nil when there are none.
func encodeNative(native map[string]string) json.RawMessage {
	if len(native) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(native))
	out := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, SafeText(k))
		out = append(out, ':')
		out = appendJSONString(out, SafeText(native[k]))
	}
	return append(out, '}')
}

// attemptCounters are the counters producers and Node.js retry libraries put
// on a message instead of x-death or x-attempt-history. x-attempt numbers the
// attempt, so it is a count of attempts; the others count retries, and a job
// retried n times was attempted n+1 times. Parse uses them only when they
// say more than x-death, the history and the body do.
var attemptCounters = []struct {
	header  string
	retries bool
}{
	{"x-attempt", false},
	{"x-retry-count", true},
	{"x-retries", true},
	{"retry-count", true},
}

// Parse turns a message from a dead-letter queue into a classified Letter.
//
// Parse never fails and never panics: a missing field or a header of the
// wrong type leaves the corresponding Letter field empty, and the rest is
// still interpreted, because a message that cannot be captured would block
// its queue during exactly the incident it belongs to. The body and headers
// are kept exactly as received in Payload and Headers; every text field is
// passed through SafeText so that it fits a PostgreSQL text column.
//
// A nil Classifier means DefaultClassifier. ingestedAt is the fallback for
// DeadLetteredAt when neither the message nor its history carries a time.
func Parse(m Message, c *Classifier, ingestedAt time.Time) (l Letter) {
	defer func() {
		// The last line of defence: a bug here must not turn one odd message
		// into a consumer that crashes on every redelivery. FuzzParse calls
		// parse directly, so such bugs still surface in tests.
		if r := recover(); r != nil {
			l = fallbackLetter(m, ingestedAt, r)
		}
	}()
	return parse(m, c, ingestedAt)
}

func parse(m Message, c *Classifier, ingestedAt time.Time) Letter {
	if c == nil {
		c = DefaultClassifier()
	}
	l := Letter{
		System:         m.System.OrDefault(),
		MessageID:      SafeText(m.MessageID),
		SourceQueue:    SafeText(m.Queue),
		ContentType:    SafeText(m.ContentType),
		Properties:     m.properties(),
		Native:         encodeNative(m.Native),
		Payload:        clonePayload(m.Body),
		PayloadHash:    sha256.Sum256(m.Body),
		AttemptHistory: []AttemptEvent{},
		Deaths:         []Death{},
	}
	entries := encodeHeaderEntries(m.Headers)
	l.Headers = joinHeaderEntries(entries, nil)
	worker := decodeAttemptHistory(m.Headers[headerAttemptHistory])
	l.Fingerprint = fingerprint(m, entries, worker)

	b, ok := decodeBody(readableBody(m))
	malformed := !ok
	l.ReservationID = b.reservationID
	l.IdempotencyKey = b.idempotencyKey
	l.ExpectedVersion = b.expectedVersion
	l.DueAt = b.dueAt

	h := m.Headers
	l.OriginalExchange, _ = headerText(h[headerOriginalExchange])
	l.OriginalRoutingKey, _ = headerText(h[headerOriginalRouting])
	l.Deaths = decodeDeaths(h[headerDeath])
	if l.System == SQS {
		l.Deaths = sqsRedrive(m)
	}
	// The origin is where the job first died: RabbitMQ names it in
	// x-first-death-queue, and keeps it as the oldest (last) x-death entry,
	// since each new dead-lettering moves its entry to the front. In a retry
	// topology the newest entry is a retry queue, not the work queue.
	if q, ok := headerText(h[headerFirstDeathQueue]); ok && q != "" {
		l.OriginQueue = SafeText(q)
	} else if len(l.Deaths) > 0 && l.Deaths[len(l.Deaths)-1].Queue != "" {
		l.OriginQueue = l.Deaths[len(l.Deaths)-1].Queue
	} else if m.Origin != "" {
		l.OriginQueue = SafeText(m.Origin)
	} else if q, ok := headerText(h[headerOriginalQueue]); ok && q != "" {
		l.OriginQueue = SafeText(q)
	}

	history := make([]AttemptEvent, 0, len(worker)+len(l.Deaths))
	history = append(history, worker...)
	for _, d := range l.Deaths {
		history = append(history, AttemptEvent{At: d.Time, Source: "broker", Reason: d.Reason, Queue: d.Queue, Count: d.Count})
	}
	// Oldest first; an event whose time is unknown goes last, in the order
	// it came, rather than first as the zero time would sort.
	slices.SortStableFunc(history, func(a, b AttemptEvent) int {
		switch az, bz := a.At.IsZero(), b.At.IsZero(); {
		case az && bz:
			return 0
		case az:
			return 1
		case bz:
			return -1
		}
		return a.At.Compare(b.At)
	})
	l.AttemptHistory = history

	l.ErrorClass, _ = headerText(h[headerErrorClass])
	l.LastError, _ = headerText(h[headerLastError])
	// Without the top-level headers, the newest worker entry that says
	// anything is the best account of why the job died: the newest of those
	// with a time, else the last of those without one.
	known := slices.IndexFunc(history, func(e AttemptEvent) bool { return e.At.IsZero() })
	if known < 0 {
		known = len(history)
	}
	order := make([]int, 0, len(history))
	for i := known - 1; i >= 0; i-- {
		order = append(order, i)
	}
	for i := len(history) - 1; i >= known; i-- {
		order = append(order, i)
	}
	for _, i := range order {
		e := history[i]
		if e.Source != "worker" || (e.ErrorClass == "" && e.Error == "") {
			continue
		}
		if l.ErrorClass == "" {
			l.ErrorClass = e.ErrorClass
		}
		if l.LastError == "" {
			l.LastError = e.Error
		}
		break
	}
	if l.ErrorClass == "" {
		l.ErrorClass = errorClassOfText(l.LastError)
	}

	// Only rejections and delivery limits are failed attempts; the
	// "expired" entries a retry topology leaves are the waits between them.
	var deathCount int64
	for _, d := range l.Deaths {
		if d.Reason == "rejected" || d.Reason == "delivery_limit" {
			deathCount = saturatingAdd(deathCount, max(d.Count, 0))
		}
	}
	deliveryCount, _ := headerInt(h[headerDeliveryCount], false)
	attempts := max(b.attempt, int64(len(worker)), deathCount, deliveryCount, 0)
	for _, c := range attemptCounters {
		n, ok := headerInt(h[c.header], true)
		if !ok || n < 0 {
			continue
		}
		if c.retries {
			n = saturatingAdd(n, 1)
		}
		attempts = max(attempts, n)
	}
	l.Attempts = int(min(attempts, math.MaxInt32))

	if id, ok := headerInt(h[headerReplayRequest], true); ok {
		l.ReplayRequestID = &id
	}
	if n, ok := headerInt(h[headerReplayCount], true); ok && n > 0 {
		l.ReplayCount = int(min(n, math.MaxInt32))
	}

	l.DeadLetteredAt = deadLetteredAt(amqpTimestamp(m.Timestamp), workerPublished(h), l.Deaths, history, ingestedAt)
	l.JobKey = firstNonEmpty(l.IdempotencyKey, l.MessageID, l.ReservationID)
	l.Category = c.Classify(&l, malformed)
	return l
}

// fallbackLetter is what Parse stores if parse panicked: the message as it
// came, so that nothing is lost and the letter can be looked at by hand.
func fallbackLetter(m Message, ingestedAt time.Time, cause any) Letter {
	l := Letter{
		MessageID:      SafeText(m.MessageID),
		SourceQueue:    SafeText(m.Queue),
		ContentType:    SafeText(m.ContentType),
		Properties:     m.properties(),
		Payload:        clonePayload(m.Body),
		PayloadHash:    sha256.Sum256(m.Body),
		Headers:        json.RawMessage(`{}`),
		AttemptHistory: []AttemptEvent{},
		Deaths:         []Death{},
		Category:       Unknown,
		LastError:      SafeText(fmt.Sprintf("expiryctl could not parse this letter: %v", cause)),
		DeadLetteredAt: validTimeOr(amqpTimestamp(m.Timestamp), ingestedAt.UTC()),
	}
	func() {
		defer func() { _ = recover() }()
		entries := encodeHeaderEntries(m.Headers)
		l.Headers = joinHeaderEntries(entries, nil)
		l.Fingerprint = fingerprint(m, entries, nil)
	}()
	if l.Fingerprint == ([32]byte{}) {
		bare := m
		bare.Headers = nil
		l.Fingerprint = fingerprint(bare, nil, nil)
	}
	l.JobKey = l.MessageID
	return l
}

func clonePayload(b []byte) []byte {
	// A copy, so the Letter does not share the delivery's buffer, and never
	// nil, because the payload column is NOT NULL.
	return append([]byte{}, b...)
}

// PayloadMalformed reports whether Parse treats body as undecodable: empty,
// MaxDecodedPayload bytes or more, not UTF-8, or not one JSON object. It lets
// a caller that re-classifies stored letters give Classify the same input
// Parse did.
func PayloadMalformed(body []byte) bool {
	_, ok := decodeBody(body)
	return !ok
}

type jobBody struct {
	reservationID   string
	idempotencyKey  string
	expectedVersion *int64
	dueAt           *time.Time
	attempt         int64
}

// decodeBody reads the job fields from a payload, reporting false when the
// payload is malformed. Fields of the wrong type are skipped, not fatal: the
// category then comes from the headers.
// readableBody is the body as its fields are read: a gzip content encoding
// undone, up to MaxDecodedPayload. The payload is stored as it came either
// way; a body that does not inflate is read as it is, and found malformed.
func readableBody(m Message) []byte {
	if !strings.EqualFold(strings.TrimSpace(m.ContentEncoding), "gzip") {
		return m.Body
	}
	zr, err := gzip.NewReader(bytes.NewReader(m.Body))
	if err != nil {
		return m.Body
	}
	inflated, err := io.ReadAll(io.LimitReader(zr, MaxDecodedPayload))
	if err != nil {
		return m.Body
	}
	return inflated
}

func decodeBody(body []byte) (jobBody, bool) {
	b, problem := readJob(body)
	return b, problem == ""
}

// PayloadProblem says why Parse found a payload malformed, in words an
// operator can act on ("body is not JSON: 77 bytes of binary data"), or ""
// when it reads as an expiry job's JSON object. contentEncoding is the
// letter's content_encoding property: a gzip body is read inflated. It is a
// function of the stored payload alone, which never changes, so it is
// derived when a letter is shown rather than stored beside it.
func PayloadProblem(body []byte, contentEncoding string) string {
	readable := readableBody(Message{Body: body, ContentEncoding: contentEncoding})
	_, problem := readJob(readable)
	if problem != "" && strings.EqualFold(strings.TrimSpace(contentEncoding), "gzip") && bytes.Equal(readable, body) {
		problem = "labelled gzip but does not inflate; " + problem
	}
	return problem
}

// readJob is decodeBody with the reason a body does not decode.
func readJob(body []byte) (jobBody, string) {
	var b jobBody
	switch {
	case len(body) == 0:
		return b, "empty body"
	case len(body) >= MaxDecodedPayload:
		return b, fmt.Sprintf("body of %d bytes is over the %d bytes read as a job", len(body), MaxDecodedPayload)
	case !utf8.Valid(body):
		return b, fmt.Sprintf("body is not JSON: %d bytes of binary data", len(body))
	}
	members, err := readJobMembers(body)
	if err != nil {
		var problem string
		if members, problem = membersByEncodingJSON(body); problem != "" {
			return b, problem
		}
	}
	field := members.get
	b.reservationID = jsonText(field(memberReservationID))
	b.idempotencyKey = jsonText(field(memberIdempotencyKey))
	if v, ok := jsonInt(field(memberExpectedVersion)); ok {
		b.expectedVersion = &v
	}
	// notBefore is when a job may run, not the business deadline, so only
	// hold_until becomes DueAt.
	if t, ok := jsonTime(field(memberHoldUntil)); ok {
		b.dueAt = &t
	}
	if n, ok := jsonInt(field(memberAttempt)); ok && n > 0 {
		b.attempt = n
	}
	return b, ""
}

// membersByEncodingJSON reads the members as capture always has, through
// encoding/json, for a body jsontext did not read as one object: the
// problem, if any, is worded as operators have seen it since capture began.
func membersByEncodingJSON(body []byte) (jobMembers, string) {
	var m jobMembers
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return m, fmt.Sprintf("body is not JSON: %v (at byte %d of %d)", syntax, syntax.Offset, len(body))
		}
		return m, fmt.Sprintf("body is JSON but not an object (%d bytes)", len(body))
	}
	if fields == nil {
		return m, "body is JSON null, not an object"
	}
	for name, value := range fields {
		m.set([]byte(strconv.Quote(name)), value)
	}
	return m, ""
}

// jsonText reads a JSON string, or the literal of a JSON number because
// some producers send numeric reservation ids.
func jsonText(raw json.RawMessage) string {
	s, ok := jsonScalar(raw)
	if !ok {
		return ""
	}
	return SafeText(s)
}

// jsonTime reads a point in time sent as an RFC 3339 string, or as a unix
// time in a JSON number or a numeric string, in seconds or milliseconds (see
// unixTime). Node.js producers send Date.now(), or Date.toISOString() and
// strings with an offset.
func jsonTime(raw json.RawMessage) (time.Time, bool) {
	s, ok := jsonScalar(raw)
	if !ok || s == "" {
		return time.Time{}, false
	}
	return textTime(s)
}

// jsonInt reads an integer sent as a JSON number or a numeric string.
func jsonInt(raw json.RawMessage) (int64, bool) {
	s, ok := jsonScalar(raw)
	if !ok || s == "" {
		return 0, false
	}
	return parseInteger(s)
}

// jsonScalar reads a JSON string's text, or a JSON number's literal, from
// one member of an object that json.Unmarshal has already validated; null
// reads as "". A string without escapes and a number are taken as they
// stand: decoding them again costs more per letter than the rest of the
// body, and the result would be the same bytes.
func jsonScalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"' && len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 &&
		bytes.IndexByte(raw[1:len(raw)-1], '"') < 0:
		return string(raw[1 : len(raw)-1]), true
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case c == '-' || c >= '0' && c <= '9':
		return string(raw), true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return "", false
	}
	return n.String(), true
}

// parseInteger accepts "3", " 3 " and "3.0", not "3.5".
func parseInteger(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return floatInt(f)
}

func floatInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// headerText reads a header string. A longstr reaches amqp091-go as a
// string, but an AMQP byte array ('x') as []byte, and producers use both.
func headerText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return SafeText(x), true
	case []byte:
		return SafeText(string(x)), true
	case SQSAttribute:
		if x.Binary() {
			return SafeText(string(x.BinaryValue)), true
		}
		return SafeText(x.StringValue), true
	}
	return "", false
}

// headerInt reads an integer of any AMQP width. Integral floats count,
// because some clients send every number as a double; numeric strings only
// when allowStrings, for headers that producers are known to stringify.
func headerInt(v any, allowStrings bool) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint:
		if uint64(x) <= math.MaxInt64 {
			return int64(x), true
		}
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	case float32:
		return floatInt(float64(x))
	case float64:
		return floatInt(x)
	case string:
		if allowStrings {
			return parseInteger(x)
		}
	case []byte:
		if allowStrings {
			return parseInteger(string(x))
		}
	case SQSAttribute:
		// An SQS Number is text on the wire, so it counts as a number.
		if x.BaseType() == "Number" || (allowStrings && !x.Binary()) {
			return parseInteger(x.StringValue)
		}
	}
	return 0, false
}

// headerTime reads a point in time: an AMQP timestamp (seconds, or
// milliseconds mistaken for seconds, see amqpTimestamp), an RFC 3339 string,
// or a unix time in seconds or milliseconds (see unixTime) as a number or a
// numeric string. A time outside years 1-9999 counts as absent: encoding/json
// cannot write it, and the timeline is stored as JSON.
func headerTime(v any) (time.Time, bool) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = amqpTimestamp(x)
	case string, []byte:
		s, _ := headerText(x)
		return textTime(s)
	case SQSAttribute:
		if x.BaseType() == "Number" {
			if n, ok := parseInteger(x.StringValue); ok {
				t = unixTime(n)
				break
			}
		}
		s, _ := headerText(x)
		return textTime(s)
	case float32:
		return floatTime(float64(x))
	case float64:
		return floatTime(x)
	default:
		n, ok := headerInt(v, false)
		if !ok {
			return time.Time{}, false
		}
		t = unixTime(n)
	}
	if !validTime(t) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// millisFrom is the magnitude from which a unix time is taken as
// milliseconds: 1e11 seconds is in the year 5138, and 1e11 milliseconds is
// March 1973, so each side of it has only one plausible reading.
const millisFrom = 1e11

// unixTime reads a unix time whose unit its magnitude tells: seconds below
// millisFrom, milliseconds (JavaScript's Date.now()) from it.
func unixTime(n int64) time.Time {
	if n >= millisFrom || n <= -millisFrom {
		return time.UnixMilli(n)
	}
	return time.Unix(n, 0)
}

// floatTime is unixTime for a number with a fraction, such as
// Date.now()/1000, which some clients send as a double.
func floatTime(f float64) (time.Time, bool) {
	if n, ok := floatInt(f); ok {
		return validUTC(unixTime(n))
	}
	// Beyond 1e15 (milliseconds in the year 33658) no reading is valid, and
	// converting to int64 would not be exact.
	if math.IsNaN(f) || math.Abs(f) >= 1e15 {
		return time.Time{}, false
	}
	if math.Abs(f) >= millisFrom {
		f /= 1000
	}
	sec := math.Floor(f)
	return validUTC(time.Unix(int64(sec), int64((f-sec)*1e9)))
}

// textTime reads an RFC 3339 string (any offset, fractional seconds
// allowed) or a numeric string holding a unix time (see unixTime).
func textTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return validUTC(t)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return validUTC(unixTime(n))
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return floatTime(f)
	}
	return time.Time{}, false
}

func validUTC(t time.Time) (time.Time, bool) {
	if !validTime(t) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// amqpTimestamp undoes a mistake amqplib lets Node.js producers make: it
// writes the timestamp property as given, and Date.now() is milliseconds,
// so the 64-bit seconds value arrives a thousand times too large. A second
// count from millisFrom on (after the year 5138) is read as milliseconds.
func amqpTimestamp(t time.Time) time.Time {
	if s := t.Unix(); s >= millisFrom || s <= -millisFrom {
		return time.UnixMilli(s)
	}
	return t
}

func validTime(t time.Time) bool {
	y := t.Year()
	return !t.IsZero() && y >= 1 && y <= 9999
}

func validTimeOr(t, fallback time.Time) time.Time {
	if validTime(t) {
		return t.UTC()
	}
	return fallback
}

// headerTable accepts amqp091.Table, which is what amqp091-go decodes, and
// plain maps, which is what Go callers and DecodeHeaders' top level give.
func headerTable(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case amqp.Table:
		return x, true
	case map[string]any:
		return x, true
	}
	return nil, false
}

func headerList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []amqp.Table:
		out := make([]any, len(x))
		for i, t := range x {
			out[i] = t
		}
		return out, true
	case []map[string]any:
		out := make([]any, len(x))
		for i, t := range x {
			out[i] = t
		}
		return out, true
	}
	return nil, false
}

// decodeDeaths reads x-death in header order, most recent first. Entries
// that are not tables are skipped; fields of the wrong type stay empty.
func decodeDeaths(v any) []Death {
	list, _ := headerList(v)
	deaths := make([]Death, 0, len(list))
	for _, e := range list {
		t, ok := headerTable(e)
		if !ok {
			continue
		}
		var d Death
		if n, ok := headerInt(t["count"], false); ok && n > 0 {
			d.Count = n
		}
		d.Reason, _ = headerText(t["reason"])
		d.Queue, _ = headerText(t["queue"])
		d.Exchange, _ = headerText(t["exchange"])
		d.RoutingKeys = []string{}
		keys, _ := headerList(t["routing-keys"])
		for _, k := range keys {
			if s, ok := headerText(k); ok {
				d.RoutingKeys = append(d.RoutingKeys, s)
			}
		}
		d.Time, _ = headerTime(t["time"])
		deaths = append(deaths, d)
	}
	return deaths
}

// decodeAttemptHistory reads the worker's x-attempt-history: an array of
// tables, or the same array as JSON text, which is what a Node.js worker
// that calls JSON.stringify on it sends. The contract says at, error_class
// and error; timestamp or time, errorClass and message are accepted too, in
// that order of preference. An entry without a readable time keeps the zero
// time, which means unknown.
func decodeAttemptHistory(v any) []AttemptEvent {
	switch x := v.(type) {
	case string:
		v = jsonHeaderValue([]byte(x))
	case []byte:
		v = jsonHeaderValue(x)
	case SQSAttribute:
		// SQS attributes are flat: a history travels as JSON text.
		if x.Binary() {
			v = jsonHeaderValue(x.BinaryValue)
		} else {
			v = jsonHeaderValue([]byte(x.StringValue))
		}
	}
	list, _ := headerList(v)
	events := make([]AttemptEvent, 0, len(list))
	for _, e := range list {
		t, ok := headerTable(e)
		if !ok {
			continue
		}
		ev := AttemptEvent{Source: "worker"}
		for _, k := range []string{"at", "timestamp", "time"} {
			if at, ok := headerTime(t[k]); ok {
				ev.At = at
				break
			}
		}
		ev.ErrorClass = firstHeaderText(t, "error_class", "errorClass")
		ev.Error = firstHeaderText(t, "error", "message")
		ev.Trace = firstHeaderText(t, "trace", "stack")
		if n, ok := headerInt(t["attempt"], true); ok && n > 0 {
			ev.Attempt = int(min(n, math.MaxInt32))
		}
		events = append(events, ev)
	}
	return events
}

// firstHeaderText is the first of keys that t holds as text.
func firstHeaderText(t map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := headerText(t[k]); ok {
			return s
		}
	}
	return ""
}

// jsonHeaderValue decodes JSON text into the value types amqp091-go gives
// for a header (integers as int64, other numbers as float64), or nil if it
// is not JSON.
func jsonHeaderValue(text []byte) any {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	var convert func(any) any
	convert = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				return i
			}
			if f, err := x.Float64(); err == nil {
				return f
			}
			return x.String()
		case []any:
			for i := range x {
				x[i] = convert(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = convert(x[k])
			}
		}
		return v
	}
	return convert(v)
}

// workerPublished reports whether a worker dead-lettered the message the
// contract's way, publishing a copy with its own headers and timestamp.
func workerPublished(h map[string]any) bool {
	for _, k := range []string{headerErrorClass, headerLastError, headerAttemptHistory} {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// deadLetteredAt says when the job died. A worker's copy carries that time as
// its AMQP timestamp. When RabbitMQ dead-letters a message it keeps the
// producer's properties, so the timestamp is the publish time and the newest
// x-death time is the death. Failing both, the newest event of the timeline,
// then the time of capture, so that the column is never empty.
func deadLetteredAt(ts time.Time, byWorker bool, deaths []Death, history []AttemptEvent, ingestedAt time.Time) time.Time {
	if byWorker && validTime(ts) {
		return ts.UTC()
	}
	var newestDeath time.Time
	for _, d := range deaths {
		if d.Time.After(newestDeath) {
			newestDeath = d.Time
		}
	}
	if !newestDeath.IsZero() {
		return newestDeath.UTC()
	}
	if validTime(ts) {
		return ts.UTC()
	}
	var newest time.Time
	for _, e := range history {
		if e.At.After(newest) {
			newest = e.At
		}
	}
	if !newest.IsZero() {
		return newest.UTC()
	}
	return ingestedAt.UTC()
}

func saturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// fingerprintVersion is hashed first so that a future change of what the
// fingerprint covers cannot collide with fingerprints already stored.
const fingerprintVersion = "expiryctl dead-letter fingerprint v1"

// fingerprintVersionTyped is hashed first instead for a letter with a
// narrow header (an int8, int16, int32, their unsigned kinds, or a
// float32). v1 hashed headers as encoded before wire types were kept, so
// an int8 5 and an int32 5 made one fingerprint and the second copy was
// lost, though the contract keeps copies that differ. v2 hashes the wire
// types. A letter without a narrow header, which is every header the
// broker writes, hashes as under v1, so its redelivery after an upgrade
// still finds the copy captured before; a letter with one, archived under
// v1 and delivered again after the upgrade, is stored once more, once
// (docs/message-contract.md).
const fingerprintVersionTyped = "expiryctl dead-letter fingerprint v2 (wire types)"

// volatileHeaders change between copies of what is one dead-lettering, so
// the fingerprint leaves them out: a quorum queue increments
// x-delivery-count on every redelivery of the same DLQ message, and a worker
// that crashed between publishing its dead-letter copy and acking the
// original publishes a second copy whose error text and times are new.
var volatileHeaders = map[string]bool{headerDeliveryCount: true, headerLastError: true, headerAttemptHistory: true}

// fingerprint hashes what makes one dead-lettering unique. Every field is
// length-prefixed, so that moving bytes from one field to the next changes
// the hash. x-death stays in: its count and time change when the same job
// dies again. For a worker's copy the timestamp and the times and texts of
// the attempt history are left out and the sequence of error classes is kept,
// so a crash duplicate is caught while a later dead-lettering of the same job
// (after a replay, with x-replay-* headers and more attempts) is not.
func fingerprint(m Message, entries []headerEntry, workerHistory []AttemptEvent) [32]byte {
	byWorker := workerPublished(m.Headers)
	h := sha256.New()
	version, headers := []byte(fingerprintVersion), joinUntypedEntries(entries, volatileHeaders)
	if narrowHeader(entries, volatileHeaders) && !m.Stored {
		version, headers = []byte(fingerprintVersionTyped), joinHeaderEntries(entries, volatileHeaders)
	}
	writeField(h, version)
	if m.Stored {
		// A job store keeps one row per job: its id and the incarnation
		// (when it failed for good) are the dead-lettering. Reading it
		// again is the same letter; dying again after a retry is not.
		writeField(h, []byte(m.System))
		writeField(h, []byte(m.Queue))
		writeField(h, []byte(m.Native[NativeJobID]))
		writeField(h, []byte(m.Native[NativeIncarnation]))
		var sum [32]byte
		h.Sum(sum[:0])
		return sum
	}
	if m.System == SQS {
		// SQS's MessageId is the server's, not the producer's: a worker
		// that sends a job to the DLQ twice (it crashed before deleting
		// the original) leaves two ids for one dead-lettering, while a
		// redelivery keeps its id. The copies are told apart by what
		// they say, as two AMQP copies are; the receive count and the
		// receive times change with every receive and are left out.
		writeField(h, []byte(SQS))
		writeField(h, []byte(m.Queue))
		writeField(h, []byte(m.Native[sqsGroupID]))
		writeField(h, []byte(m.Native[sqsDeduplicationID]))
		// A letter SQS's redrive moved carries nothing of its own death
		// (no worker wrote why), so a job sent again and dead again would
		// read as the copy it is not; its message id, which SQS keeps
		// across the redrive and every redelivery, tells them apart.
		if len(sqsRedrive(m)) > 0 {
			writeField(h, []byte(m.MessageID))
		}
	} else {
		writeField(h, []byte(m.Queue))
		writeField(h, []byte(m.MessageID))
	}
	writeField(h, []byte(m.ContentType))
	// Seconds and nanoseconds rather than UnixNano, which is undefined
	// outside 1678-2262 and AMQP timestamps can be any 64-bit second count.
	var ts []byte
	if !m.Timestamp.IsZero() && !byWorker {
		ts = binary.BigEndian.AppendUint64(ts, uint64(m.Timestamp.Unix()))
		ts = binary.BigEndian.AppendUint32(ts, uint32(m.Timestamp.Nanosecond()))
	}
	writeField(h, ts)
	writeField(h, m.Body)
	writeField(h, headers)
	for _, e := range workerHistory {
		writeField(h, []byte(e.ErrorClass))
	}
	// Without a history, the last error is all that tells two deaths apart.
	if _, ok := m.Headers[headerAttemptHistory]; !ok {
		for _, e := range entries {
			if e.key == headerLastError {
				writeField(h, e.json)
			}
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// narrowHeader reports whether an entry that skip does not leave out holds
// a narrow wire type, which is when its untyped encoding was kept.
func narrowHeader(entries []headerEntry, skip map[string]bool) bool {
	for _, e := range entries {
		if e.untyped != nil && !skip[e.key] {
			return true
		}
	}
	return false
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// SafeText returns s as PostgreSQL text can hold it: valid UTF-8 passes
// unchanged, except NUL, which becomes the four characters \x00; each byte
// that is not part of valid UTF-8 becomes \xNN (lowercase hex). Backslashes
// are not escaped, so the result is for reading and filtering, not for
// reversing: the exact bytes stay in Letter.Headers and Letter.Payload.
func SafeText(s string) string {
	if jsonbSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case s[i] == 0:
			b.WriteString(`\x00`)
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
