package deadletter

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	testDLQ       = "reservation-expiry.dlq"
	testWorkQueue = "reservation-expiry"
	testRetry     = "reservation-expiry.retry"
	testJob       = `{"reservation_id": "r-8421", "expected_version": 3, "hold_until": "2026-11-30T12:20:00Z", "idempotency_key": "expire:r-8421:v3", "attempt": 2}`
)

var (
	testIngested = time.Date(2026, 11, 30, 12, 45, 0, 0, time.UTC)
	// testDied is in seconds and the local zone, as amqp091-go decodes an
	// AMQP timestamp.
	testDied = time.Unix(time.Date(2026, 11, 30, 12, 21, 0, 0, time.UTC).Unix(), 0)
)

// testMessage is a job as the contract describes it, on the DLQ.
func testMessage(body string, headers amqp.Table) Message {
	return Message{
		Queue:       testDLQ,
		Body:        []byte(body),
		Headers:     headers,
		ContentType: "application/json",
		MessageID:   "r-8421:v3",
	}
}

// testDeath is one x-death entry as RabbitMQ 3.10+ writes it.
func testDeath(reason, queue string, count int64, at time.Time) amqp.Table {
	return amqp.Table{
		"count":        count,
		"reason":       reason,
		"queue":        queue,
		"exchange":     "reservations",
		"routing-keys": []any{"reservation.expire"},
		"time":         at,
	}
}

// testBrokerHeaders is the header table RabbitMQ builds when it dead-letters
// a message, including the x-first-death-* and x-last-death-* companions.
func testBrokerHeaders(deaths ...amqp.Table) amqp.Table {
	h := amqp.Table{"x-death": toAnySlice(deaths)}
	if len(deaths) > 0 {
		first, last := deaths[len(deaths)-1], deaths[0]
		h["x-first-death-exchange"] = first["exchange"]
		h["x-first-death-queue"] = first["queue"]
		h["x-first-death-reason"] = first["reason"]
		h["x-last-death-exchange"] = last["exchange"]
		h["x-last-death-queue"] = last["queue"]
		h["x-last-death-reason"] = last["reason"]
	}
	return h
}

func toAnySlice(tables []amqp.Table) []any {
	out := make([]any, len(tables))
	for i, t := range tables {
		out[i] = t
	}
	return out
}

// testWorkerHeaders is what the worker adds when it dead-letters a job itself.
func testWorkerHeaders(class, lastError string) amqp.Table {
	return amqp.Table{
		"x-error-class":          class,
		"x-last-error":           lastError,
		"x-original-exchange":    "reservations",
		"x-original-routing-key": "reservation.expire",
		"x-attempt-history": []any{
			amqp.Table{"at": testDied.Add(-3 * time.Minute), "error_class": class, "error": "attempt 1: " + lastError},
			amqp.Table{"at": testDied.Add(-2 * time.Minute), "error_class": class, "error": "attempt 2: " + lastError},
			amqp.Table{"at": testDied.Add(-1 * time.Minute), "error_class": class, "error": "attempt 3: " + lastError},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseBody(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	tests := []struct {
		name        string
		body        string
		messageID   string
		reservation string
		key         string
		version     *int64
		dueAt       *time.Time
		attempts    int
		jobKey      string
	}{
		{"snake_case", testJob, "r-8421:v3", "r-8421", "expire:r-8421:v3", ptr[int64](3), &due, 2, "expire:r-8421:v3"},
		{"camelCase",
			`{"reservationId": "r-8421", "expectedVersion": 3, "holdUntil": "2026-11-30T13:20:00+01:00", "idempotencyKey": "expire:r-8421:v3", "attempt": 2, "notBefore": "2026-11-30T12:00:00Z"}`,
			"r-8421:v3", "r-8421", "expire:r-8421:v3", ptr[int64](3), &due, 2, "expire:r-8421:v3"},
		{"snake_case wins over camelCase", `{"reservation_id": "r-1", "reservationId": "r-2"}`,
			"", "r-1", "", nil, nil, 0, "r-1"},
		{"numeric strings and whole floats", `{"reservation_id": 8421, "expected_version": "3", "attempt": 4.0}`,
			"", "8421", "", ptr[int64](3), nil, 4, "8421"},
		{"wrong types are skipped", `{"reservation_id": ["r"], "expected_version": 3.5, "hold_until": "tomorrow", "idempotency_key": {}, "attempt": "many"}`,
			"m-1", "", "", nil, nil, 0, "m-1"},
		{"notBefore is not the deadline", `{"reservation_id": "r-1", "notBefore": "2026-11-30T12:00:00Z", "not_before": "2026-11-30T12:00:00Z"}`,
			"", "r-1", "", nil, nil, 0, "r-1"},
		{"keys match exactly", `{"Reservation_ID": "r-1", "IDEMPOTENCY_KEY": "k"}`, "", "", "", nil, nil, 0, ""},
		{"escapes in values", `{"reservation_id": "r-\u0000-1", "idempotency_key": "k\u00e9"}`,
			"", `r-\x00-1`, "ké", nil, nil, 0, "ké"},
		{"null, quotes, negatives and booleans", `{"reservation_id": null, "idempotency_key": "a\\\"b", "expected_version": -2, "attempt": true}`,
			"", "", `a\"b`, ptr[int64](-2), nil, 0, `a\"b`},
		{"empty object", `{}`, "", "", "", nil, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := testMessage(tt.body, nil)
			m.MessageID = tt.messageID
			l := Parse(m, nil, testIngested)
			if l.ReservationID != tt.reservation || l.IdempotencyKey != tt.key || l.JobKey != tt.jobKey {
				t.Errorf("ReservationID, IdempotencyKey, JobKey = %q, %q, %q; want %q, %q, %q",
					l.ReservationID, l.IdempotencyKey, l.JobKey, tt.reservation, tt.key, tt.jobKey)
			}
			if !reflect.DeepEqual(l.ExpectedVersion, tt.version) {
				t.Errorf("ExpectedVersion = %v, want %v", deref(l.ExpectedVersion), deref(tt.version))
			}
			if !reflect.DeepEqual(l.DueAt, tt.dueAt) {
				t.Errorf("DueAt = %v, want %v", deref(l.DueAt), deref(tt.dueAt))
			}
			if l.Attempts != tt.attempts {
				t.Errorf("Attempts = %d, want %d", l.Attempts, tt.attempts)
			}
			if l.Category != Unknown {
				t.Errorf("Category = %s, want unknown: a good body with no headers says nothing about why", l.Category)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestParseMalformedPayload(t *testing.T) {
	t.Parallel()
	big := []byte(`{"reservation_id": "r-big", "pad": "` + strings.Repeat("x", 2<<20) + `"}`)
	justUnder := []byte(`{"reservation_id": "r-edge", "pad": "`)
	justUnder = append(justUnder, bytes.Repeat([]byte("x"), MaxDecodedPayload-1-len(justUnder)-2)...)
	justUnder = append(justUnder, `"}`...)
	justOver := append(bytes.Clone(justUnder[:len(justUnder)-2]), `x"}`...)

	tests := []struct {
		name      string
		body      []byte
		malformed bool
	}{
		{"empty", []byte{}, true},
		{"nil", nil, true},
		{"binary", []byte{0x1f, 0x8b, 0x08, 0x00, 0xff, 0x00}, true},
		{"JSON with invalid UTF-8", []byte("{\"reservation_id\": \"r-\xff\"}"), true},
		{"not JSON", []byte("reservation r-8421 expired"), true},
		{"truncated JSON", []byte(testJob[:40]), true},
		{"trailing data", []byte(testJob + " {}"), true},
		{"array", []byte(`[` + testJob + `]`), true},
		{"null", []byte(`null`), true},
		{"string", []byte(`"r-8421"`), true},
		{"2 MiB object", big, true},
		{"one byte under the limit", justUnder, false},
		{"at the limit", justOver, true},
		{"whitespace around an object", []byte("\n " + testJob + "\n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := bytes.Clone(tt.body)
			// The error class names a transient failure: a payload nobody
			// can decode still has to be triaged as malformed.
			l := Parse(Message{Queue: testDLQ, Body: body, Headers: amqp.Table{"x-error-class": "db_timeout"}}, nil, testIngested)
			if got := PayloadMalformed(tt.body); got != tt.malformed {
				t.Fatalf("PayloadMalformed = %v, want %v", got, tt.malformed)
			}
			wantCat := TransientExhausted
			if tt.malformed {
				wantCat = Malformed
				if l.ReservationID != "" || l.JobKey != "" {
					t.Errorf("fields decoded from a malformed payload: %q, %q", l.ReservationID, l.JobKey)
				}
			}
			if l.Category != wantCat {
				t.Errorf("Category = %s, want %s", l.Category, wantCat)
			}
			if !bytes.Equal(l.Payload, tt.body) || l.Payload == nil {
				t.Errorf("Payload is not the body byte for byte (len %d vs %d, nil %v)", len(l.Payload), len(tt.body), l.Payload == nil)
			}
			if l.PayloadHash != sha256.Sum256(tt.body) {
				t.Errorf("PayloadHash is not sha256(body)")
			}
			if l.ErrorClass != "db_timeout" {
				t.Errorf("ErrorClass = %q: headers must still be read", l.ErrorClass)
			}
		})
	}
}

func TestParsePayloadIsACopy(t *testing.T) {
	t.Parallel()
	body := []byte(testJob)
	m := testMessage("", nil)
	m.Body = body
	l := Parse(m, nil, testIngested)
	if string(body) != testJob {
		t.Fatal("Parse modified the body")
	}
	body[0] = '['
	if string(l.Payload) != testJob {
		t.Error("Payload shares the delivery's buffer")
	}
}

func TestFingerprintBrokerMadeTimestamp(t *testing.T) {
	t.Parallel()
	m := testMessage(testJob, amqp.Table{"x-death": []any{testDeath("rejected", testWorkQueue, 1, testDied)}})
	m.Timestamp = testDied
	want := Parse(m, nil, testIngested).Fingerprint
	for name, ts := range map[string]time.Time{"later": testDied.Add(time.Nanosecond), "none": {}} {
		other := m
		other.Timestamp = ts
		if Parse(other, nil, testIngested).Fingerprint == want {
			t.Errorf("a broker-made letter with the %s timestamp keeps the fingerprint", name)
		}
	}
}

func TestFingerprintWorkerCrashDuplicate(t *testing.T) {
	t.Parallel()
	// A worker that crashed after its dead-letter copy was confirmed but
	// before it acked the original processes the redelivered original again
	// and publishes a second copy: same job, same attempt, new times and text.
	copyAt := func(at time.Time, text string) Message {
		h := amqp.Table{
			"x-error-class": "db_timeout",
			"x-last-error":  text,
			"x-attempt-history": []any{
				amqp.Table{"at": testDied.Add(-time.Minute), "error_class": "db_timeout", "error": "first"},
				amqp.Table{"at": at, "error_class": "db_timeout", "error": text},
			},
			"x-death": []any{testDeath("rejected", testWorkQueue, 1, testDied.Add(-2*time.Minute))},
		}
		m := testMessage(testJob, h)
		m.Timestamp = at
		return m
	}
	first := Parse(copyAt(testDied, "timeout after 5.001s"), nil, testIngested)
	second := Parse(copyAt(testDied.Add(3*time.Second), "timeout after 5.017s"), nil, testIngested)
	if first.Fingerprint != second.Fingerprint {
		t.Fatal("a worker's crash duplicate has a new fingerprint and would be stored twice")
	}
	replayed := copyAt(testDied.Add(time.Hour), "timeout")
	replayed.Headers["x-replay-request"] = int64(4)
	if Parse(replayed, nil, testIngested).Fingerprint == first.Fingerprint {
		t.Fatal("the same job dying again after a replay has the old fingerprint")
	}
}

func TestParseWorkerLetter(t *testing.T) {
	t.Parallel()
	h := testWorkerHeaders("db_timeout", "context deadline exceeded")
	// A worker copies the headers of the message it consumed, so the retry
	// hops RabbitMQ recorded come along.
	h["x-death"] = []any{
		testDeath("expired", testRetry, 2, testDied.Add(-90*time.Second)),
		testDeath("rejected", testWorkQueue, 2, testDied.Add(-150*time.Second)),
	}
	m := testMessage(testJob, h)
	m.Timestamp = testDied
	l := Parse(m, nil, testIngested)

	if l.Category != TransientExhausted || l.ErrorClass != "db_timeout" || l.LastError != "context deadline exceeded" {
		t.Errorf("Category, ErrorClass, LastError = %s, %q, %q", l.Category, l.ErrorClass, l.LastError)
	}
	if l.OriginalExchange != "reservations" || l.OriginalRoutingKey != "reservation.expire" {
		t.Errorf("origin = %q %q", l.OriginalExchange, l.OriginalRoutingKey)
	}
	if l.OriginQueue != testWorkQueue {
		t.Errorf("OriginQueue = %q, want the oldest x-death entry's queue %q", l.OriginQueue, testWorkQueue)
	}
	// Three worker entries beat two rejections and attempt 2; the expired
	// retry hops are waits, not attempts.
	if l.Attempts != 3 {
		t.Errorf("Attempts = %d, want 3", l.Attempts)
	}
	if !l.DeadLetteredAt.Equal(testDied) || l.DeadLetteredAt.Location() != time.UTC {
		t.Errorf("DeadLetteredAt = %v, want the AMQP timestamp %v in UTC", l.DeadLetteredAt, testDied)
	}
	var sources []string
	for i, e := range l.AttemptHistory {
		sources = append(sources, e.Source+":"+e.Reason+e.Error)
		if i > 0 && e.At.Before(l.AttemptHistory[i-1].At) {
			t.Errorf("history not oldest first at %d", i)
		}
	}
	want := []string{
		"worker:attempt 1: context deadline exceeded",
		"broker:rejected",
		"worker:attempt 2: context deadline exceeded",
		"broker:expired",
		"worker:attempt 3: context deadline exceeded",
	}
	if !reflect.DeepEqual(sources, want) {
		t.Errorf("history = %q\nwant %q", sources, want)
	}
}

func TestParseLastErrorFromHistory(t *testing.T) {
	t.Parallel()
	h := testWorkerHeaders("", "")
	delete(h, "x-error-class")
	delete(h, "x-last-error")
	history := h["x-attempt-history"].([]any)
	// Out of order, with the `at` forms the contract allows.
	h["x-attempt-history"] = []any{
		amqp.Table{"at": testDied.Unix(), "error_class": "not_found", "error": "reservation r-8421 not found"},
		amqp.Table{"at": testDied.Add(-time.Hour).Format(time.RFC3339), "error_class": "db_timeout", "error": "older"},
		history[0],
	}
	l := Parse(testMessage(testJob, h), nil, testIngested)
	if l.LastError != "reservation r-8421 not found" || l.ErrorClass != "not_found" || l.Category != NotFound {
		t.Errorf("LastError, ErrorClass, Category = %q, %q, %s", l.LastError, l.ErrorClass, l.Category)
	}
	if !l.DeadLetteredAt.Equal(testDied) {
		t.Errorf("DeadLetteredAt = %v, want the newest history entry %v", l.DeadLetteredAt, testDied)
	}
}

func TestParseBrokerLetters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		headers  amqp.Table
		category Category
		origin   string
		attempts int
		died     time.Time
	}{
		// The body says attempt 2, which beats a single x-death count.
		{"rejected", testBrokerHeaders(testDeath("rejected", testWorkQueue, 1, testDied)), Unknown, testWorkQueue, 2, testDied},
		{"expired", testBrokerHeaders(testDeath("expired", testWorkQueue, 1, testDied)), BrokerExpired, testWorkQueue, 2, testDied},
		{"maxlen", testBrokerHeaders(testDeath("maxlen", testWorkQueue, 1, testDied)), BrokerLimit, testWorkQueue, 2, testDied},
		{"delivery_limit", func() amqp.Table {
			h := testBrokerHeaders(testDeath("delivery_limit", testWorkQueue, 1, testDied))
			h["x-delivery-count"] = int64(20)
			return h
		}(), BrokerLimit, testWorkQueue, 20, testDied},
		{"rejected after retry hops, most recent first",
			testBrokerHeaders(
				testDeath("rejected", testWorkQueue, 3, testDied),
				testDeath("expired", testRetry, 2, testDied.Add(-time.Minute)),
			), Unknown, testRetry, 3, testDied},
		{"expired in the retry queue last",
			testBrokerHeaders(
				testDeath("expired", testRetry, 3, testDied),
				testDeath("rejected", testWorkQueue, 3, testDied.Add(-time.Minute)),
			), BrokerExpired, testWorkQueue, 3, testDied},
		{"longstr as bytes, int32 count, float count", amqp.Table{"x-death": []any{
			amqp.Table{"count": int32(2), "reason": []byte("expired"), "queue": []byte(testWorkQueue), "routing-keys": []any{[]byte("reservation.expire")}, "time": testDied},
			amqp.Table{"count": 1.0, "reason": "rejected", "queue": testRetry},
		}}, BrokerExpired, testRetry, 2, testDied},
		{"x-death as a slice of plain maps", amqp.Table{"x-death": []map[string]any{
			{"count": int64(1), "reason": "maxlen", "queue": testWorkQueue, "time": testDied},
		}}, BrokerLimit, testWorkQueue, 2, testDied},
		{"reason in capitals", testBrokerHeaders(testDeath("EXPIRED", testWorkQueue, 1, testDied)), BrokerExpired, testWorkQueue, 2, testDied},
		{"unknown reason", testBrokerHeaders(testDeath("exploded", testWorkQueue, 1, testDied)), Unknown, testWorkQueue, 2, testDied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := Parse(testMessage(testJob, tt.headers), nil, testIngested)
			if l.Category != tt.category || l.OriginQueue != tt.origin || l.Attempts != tt.attempts {
				t.Errorf("Category, OriginQueue, Attempts = %s, %q, %d; want %s, %q, %d",
					l.Category, l.OriginQueue, l.Attempts, tt.category, tt.origin, tt.attempts)
			}
			if !l.DeadLetteredAt.Equal(tt.died) || l.DeadLetteredAt.Location() != time.UTC {
				t.Errorf("DeadLetteredAt = %v, want %v in UTC", l.DeadLetteredAt, tt.died)
			}
			if len(l.Deaths) == 0 || len(l.AttemptHistory) != len(l.Deaths) {
				t.Fatalf("Deaths %d, history %d: want one broker event per death", len(l.Deaths), len(l.AttemptHistory))
			}
			if l.ErrorClass != "" || l.LastError != "" {
				t.Errorf("broker-made letter has error %q %q", l.ErrorClass, l.LastError)
			}
		})
	}
}

func TestParseDecodesDeaths(t *testing.T) {
	t.Parallel()
	h := testBrokerHeaders(
		testDeath("rejected", testWorkQueue, 3, testDied),
		testDeath("expired", testRetry, 2, testDied.Add(-time.Minute)),
	)
	l := Parse(testMessage(testJob, h), nil, testIngested)
	want := []Death{
		{Count: 3, Reason: "rejected", Queue: testWorkQueue, Exchange: "reservations", RoutingKeys: []string{"reservation.expire"}, Time: testDied.UTC()},
		{Count: 2, Reason: "expired", Queue: testRetry, Exchange: "reservations", RoutingKeys: []string{"reservation.expire"}, Time: testDied.Add(-time.Minute).UTC()},
	}
	if !reflect.DeepEqual(l.Deaths, want) {
		t.Errorf("Deaths = %+v\nwant %+v", l.Deaths, want)
	}
	wantHistory := []AttemptEvent{
		{At: testDied.Add(-time.Minute).UTC(), Source: "broker", Reason: "expired", Queue: testRetry, Count: 2},
		{At: testDied.UTC(), Source: "broker", Reason: "rejected", Queue: testWorkQueue, Count: 3},
	}
	if !reflect.DeepEqual(l.AttemptHistory, wantHistory) {
		t.Errorf("AttemptHistory = %+v\nwant %+v", l.AttemptHistory, wantHistory)
	}
	// archive.go re-derives Deaths from the stored headers.
	stored, err := DecodeHeaders(l.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if again := Parse(Message{Headers: stored}, nil, testIngested); !reflect.DeepEqual(again.Deaths, want) {
		t.Errorf("Deaths from stored headers = %+v\nwant %+v", again.Deaths, want)
	}
}

func TestParseDeliveryCountOnly(t *testing.T) {
	t.Parallel()
	for _, count := range []any{int64(7), int32(7), int16(7), byte(7), uint32(7), 7.0} {
		l := Parse(testMessage(testJob, amqp.Table{"x-delivery-count": count}), nil, testIngested)
		if l.Category != Unknown || l.Attempts != 7 {
			t.Errorf("x-delivery-count %T: Category, Attempts = %s, %d; want unknown, 7", count, l.Category, l.Attempts)
		}
		if !l.DeadLetteredAt.Equal(testIngested) {
			t.Errorf("DeadLetteredAt = %v, want ingestedAt", l.DeadLetteredAt)
		}
	}
}

func TestParseWrongTypedHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		headers  amqp.Table
		category Category
		check    func(t *testing.T, l Letter)
	}{
		{"x-death as a string", amqp.Table{"x-death": "expired", "x-error-class": "validation"}, Validation,
			func(t *testing.T, l Letter) {
				if len(l.Deaths) != 0 || l.OriginQueue != "" {
					t.Errorf("Deaths %v from a string", l.Deaths)
				}
			}},
		{"x-error-class as an int", amqp.Table{"x-error-class": int32(429), "x-last-error": "deadlock detected"}, TransientExhausted,
			func(t *testing.T, l Letter) {
				if l.ErrorClass != "" {
					t.Errorf("ErrorClass = %q from an int", l.ErrorClass)
				}
			}},
		{"x-attempt-history as a table",
			amqp.Table{"x-attempt-history": amqp.Table{"at": testDied, "error": "timeout"}, "x-death": []any{testDeath("expired", testWorkQueue, 1, testDied)}},
			BrokerExpired,
			func(t *testing.T, l Letter) {
				if len(l.AttemptHistory) != 1 || l.LastError != "" {
					t.Errorf("history from a table: %+v, LastError %q", l.AttemptHistory, l.LastError)
				}
			}},
		{"x-death entries of the wrong type among good ones",
			amqp.Table{"x-death": []any{"junk", int64(3), nil, testDeath("maxlen", testWorkQueue, 1, testDied), amqp.Table{"count": "many", "reason": int64(1), "time": "soon"}}},
			BrokerLimit,
			func(t *testing.T, l Letter) {
				if len(l.Deaths) != 2 || l.Deaths[1].Count != 0 || l.Deaths[1].Reason != "" || !l.Deaths[1].Time.IsZero() {
					t.Errorf("Deaths = %+v", l.Deaths)
				}
			}},
		{"history entries with odd times", amqp.Table{"x-attempt-history": []any{
			amqp.Table{"at": "yesterday", "error": "a"},
			amqp.Table{"at": testDied.UnixMilli(), "error": "b"},
			amqp.Table{"at": time.Unix(1<<40, 0), "error": "c"},
			amqp.Table{"at": int32(testDied.Unix()), "errorClass": "throttled", "error": "d"},
			"not a table",
		}}, TransientExhausted,
			func(t *testing.T, l Letter) {
				var got []string
				for _, e := range l.AttemptHistory {
					got = append(got, e.Error+"@"+e.At.Format(time.RFC3339))
				}
				// An unknown time sorts last; a timestamp a thousand
				// times too large is milliseconds.
				died := testDied.UTC().Format(time.RFC3339)
				want := []string{"c@2004-11-03T19:53:47Z", "b@" + died, "d@" + died, "a@0001-01-01T00:00:00Z"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("history = %q, want %q", got, want)
				}
				if l.ErrorClass != "throttled" || l.LastError != "d" || l.Attempts != 4 {
					t.Errorf("ErrorClass, LastError, Attempts = %q, %q, %d", l.ErrorClass, l.LastError, l.Attempts)
				}
				if _, err := json.Marshal(l.AttemptHistory); err != nil {
					t.Errorf("history cannot be stored: %v", err)
				}
			}},
		{"origin headers of the wrong type", amqp.Table{"x-original-exchange": int64(1), "x-original-routing-key": []any{"a"}, "x-error-class": "not-found"}, NotFound,
			func(t *testing.T, l Letter) {
				if l.OriginalExchange != "" || l.OriginalRoutingKey != "" {
					t.Errorf("origin = %q %q", l.OriginalExchange, l.OriginalRoutingKey)
				}
			}},
		{"counts of the wrong type", amqp.Table{"x-delivery-count": "3", "x-replay-count": "two", "x-replay-request": 1.5}, Unknown,
			func(t *testing.T, l Letter) {
				if l.Attempts != 2 || l.ReplayCount != 0 || l.ReplayRequestID != nil {
					t.Errorf("Attempts, ReplayCount, ReplayRequestID = %d, %d, %v", l.Attempts, l.ReplayCount, l.ReplayRequestID)
				}
			}},
		{"absurd numbers", amqp.Table{"x-delivery-count": int64(1) << 62, "x-death": []any{
			testDeath("expired", testWorkQueue, 1<<62, testDied), testDeath("expired", testWorkQueue, 1<<62, testDied), testDeath("expired", testWorkQueue, -5, testDied),
		}}, BrokerExpired,
			func(t *testing.T, l Letter) {
				if l.Attempts != 1<<31-1 {
					t.Errorf("Attempts = %d, want it capped at the column's range", l.Attempts)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := Parse(testMessage(testJob, tt.headers), nil, testIngested)
			if l.Category != tt.category {
				t.Errorf("Category = %s, want %s", l.Category, tt.category)
			}
			tt.check(t, l)
			// Whatever was not understood is still stored.
			stored, err := DecodeHeaders(l.Headers)
			if err != nil {
				t.Fatal(err)
			}
			for k := range tt.headers {
				if _, ok := stored[k]; !ok {
					t.Errorf("header %q not stored", k)
				}
			}
		})
	}
}

func TestParseReplayHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		request any
		count   any
		wantID  *int64
		wantN   int
	}{
		{int64(42), int64(1), ptr[int64](42), 1},
		{int32(42), int32(2), ptr[int64](42), 2},
		{"42", " 3 ", ptr[int64](42), 3},
		{[]byte("42"), byte(1), ptr[int64](42), 1},
		{nil, nil, nil, 0},
		{"r-42", int64(-1), nil, 0},
	}
	for _, tt := range tests {
		h := amqp.Table{}
		if tt.request != nil {
			h["x-replay-request"] = tt.request
		}
		if tt.count != nil {
			h["x-replay-count"] = tt.count
		}
		l := Parse(testMessage(testJob, h), nil, testIngested)
		if !reflect.DeepEqual(l.ReplayRequestID, tt.wantID) || l.ReplayCount != tt.wantN {
			t.Errorf("x-replay-request %#v, x-replay-count %#v: got %v, %d; want %v, %d",
				tt.request, tt.count, deref(l.ReplayRequestID), l.ReplayCount, deref(tt.wantID), tt.wantN)
		}
	}
}

func TestParseDeadLetteredAt(t *testing.T) {
	t.Parallel()
	deathHeaders := testBrokerHeaders(testDeath("expired", testWorkQueue, 1, testDied))
	ist := time.FixedZone("IST", 5*3600+1800)
	tests := []struct {
		name      string
		timestamp time.Time
		headers   amqp.Table
		want      time.Time
	}{
		// RabbitMQ keeps the producer's timestamp: x-death says when it died.
		{"broker-made: x-death time over timestamp", testDied.Add(-time.Hour).In(ist), deathHeaders, testDied},
		{"worker copy: its timestamp", testDied.Add(-time.Hour).In(ist), amqp.Table{"x-error-class": "db_timeout"}, testDied.Add(-time.Hour)},
		{"AMQP timestamp without x-death", testDied.Add(-time.Hour).In(ist), nil, testDied.Add(-time.Hour)},
		{"newest event", time.Time{}, deathHeaders, testDied},
		{"timestamp beyond year 9999", time.Unix(1<<40, 0), deathHeaders, testDied},
		{"capture time", time.Time{}, nil, testIngested},
	}
	for _, tt := range tests {
		m := testMessage(testJob, tt.headers)
		m.Timestamp = tt.timestamp
		l := Parse(m, nil, testIngested.In(ist))
		if !l.DeadLetteredAt.Equal(tt.want) || l.DeadLetteredAt.Location() != time.UTC {
			t.Errorf("%s: DeadLetteredAt = %v, want %v in UTC", tt.name, l.DeadLetteredAt, tt.want)
		}
	}
}

func TestParseTextIsSafe(t *testing.T) {
	t.Parallel()
	nasty := "a\x00b\xffc\\x00é"
	h := testWorkerHeaders(nasty, nasty)
	h["x-original-exchange"] = []byte(nasty)
	h["x-death"] = []any{testDeath(nasty, nasty, 1, testDied)}
	m := testMessage(`{"reservation_id": "r\u0000", "idempotency_key": "k\\x00"}`, h)
	m.MessageID = nasty
	m.Queue = nasty
	m.ContentType = nasty
	l := Parse(m, nil, testIngested)

	want := `a\x00b\xffc\x00é`
	for name, got := range map[string]string{
		"MessageID": l.MessageID, "SourceQueue": l.SourceQueue, "ContentType": l.ContentType,
		"ErrorClass": l.ErrorClass, "LastError": l.LastError, "OriginalExchange": l.OriginalExchange,
		"OriginQueue": l.OriginQueue, "Death.Reason": l.Deaths[0].Reason, "history error": strings.TrimPrefix(l.AttemptHistory[0].Error, "attempt 1: "),
	} {
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if l.ReservationID != `r\x00` || l.IdempotencyKey != `k\x00` {
		t.Errorf("body text = %q, %q", l.ReservationID, l.IdempotencyKey)
	}
	// The exact bytes survive in the stored headers.
	stored, err := DecodeHeaders(l.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if stored["x-last-error"] != nasty || !bytes.Equal(stored["x-original-exchange"].([]byte), []byte(nasty)) {
		t.Errorf("stored headers lost the original bytes: %q", stored["x-last-error"])
	}
}

func TestParseSurvivesHostileHeaders(t *testing.T) {
	t.Parallel()
	h := map[string]any{"x-error-class": "validation"}
	h["self"] = h
	l := Parse(testMessage(testJob, h), nil, testIngested)
	if l.Category != Validation {
		t.Errorf("Category = %s", l.Category)
	}
	if _, err := DecodeHeaders(l.Headers); err != nil {
		t.Error(err)
	}
}

func TestFallbackLetter(t *testing.T) {
	t.Parallel()
	m := testMessage(testJob, amqp.Table{"x-delivery-count": int64(1)})
	l := fallbackLetter(m, testIngested, "boom")
	if l.Category != Unknown || !bytes.Equal(l.Payload, m.Body) || string(l.Headers) != `{"x-delivery-count":1}` {
		t.Errorf("fallback letter = %+v", l)
	}
	m.Headers["x-delivery-count"] = int64(2)
	if fallbackLetter(m, testIngested, "boom").Fingerprint != l.Fingerprint {
		t.Error("fallback fingerprint depends on x-delivery-count")
	}
}

func TestFingerprintStable(t *testing.T) {
	t.Parallel()
	build := func(deliveryCount int64, reverse bool) Message {
		h := amqp.Table{}
		entries := []struct {
			k string
			v any
		}{
			{"x-error-class", "db_timeout"},
			{"x-last-error", "timeout"},
			{"x-death", []any{testDeath("rejected", testWorkQueue, 1, testDied)}},
			{"x-delivery-count", deliveryCount},
			{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"},
		}
		if reverse {
			for i := len(entries) - 1; i >= 0; i-- {
				h[entries[i].k] = entries[i].v
			}
		} else {
			for _, e := range entries {
				h[e.k] = e.v
			}
		}
		m := testMessage(testJob, h)
		m.Timestamp = testDied
		return m
	}
	want := Parse(build(1, false), nil, testIngested).Fingerprint
	for i, m := range []Message{build(1, true), build(2, false), build(99, true)} {
		if got := Parse(m, nil, testIngested.Add(time.Hour)).Fingerprint; got != want {
			t.Errorf("copy %d has a different fingerprint", i)
		}
	}
	m := build(1, false)
	delete(m.Headers, "x-delivery-count")
	if Parse(m, nil, testIngested).Fingerprint != want {
		t.Error("a missing x-delivery-count changes the fingerprint")
	}
}

func TestFingerprintSensitive(t *testing.T) {
	t.Parallel()
	base := func() Message {
		m := testMessage(testJob, amqp.Table{
			"x-error-class": "db_timeout",
			"x-death":       []any{testDeath("rejected", testWorkQueue, 1, testDied)},
		})
		m.Timestamp = testDied
		return m
	}
	changes := map[string]func(m *Message){
		"body":          func(m *Message) { m.Body = []byte(testJob + " ") },
		"header value":  func(m *Message) { m.Headers["x-error-class"] = "db_timeout2" },
		"header type":   func(m *Message) { m.Headers["x-error-class"] = []byte("db_timeout") },
		"header added":  func(m *Message) { m.Headers["x-other"] = nil },
		"x-death count": func(m *Message) { m.Headers["x-death"].([]any)[0].(amqp.Table)["count"] = int64(2) },
		"x-death time":  func(m *Message) { m.Headers["x-death"].([]any)[0].(amqp.Table)["time"] = testDied.Add(time.Second) },
		"message id":    func(m *Message) { m.MessageID += "x" },
		"queue":         func(m *Message) { m.Queue += "x" },
		"content type":  func(m *Message) { m.ContentType = "text/plain" },
		"error class sequence": func(m *Message) {
			m.Headers["x-attempt-history"] = []any{amqp.Table{"at": testDied, "error_class": "throttled", "error": "x"}}
		},
		"bytes between fields":                 func(m *Message) { m.Queue, m.MessageID = m.Queue+"r", strings.TrimPrefix(m.MessageID, "r") },
		"body becomes empty":                   func(m *Message) { m.Body = nil },
		"a header named like x-delivery-count": func(m *Message) { m.Headers["x-delivery-count2"] = int64(1) },
	}
	want := Parse(base(), nil, testIngested).Fingerprint
	for name, change := range changes {
		m := base()
		change(&m)
		if Parse(m, nil, testIngested).Fingerprint == want {
			t.Errorf("changing the %s keeps the fingerprint", name)
		}
	}
}

func TestSafeText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain ascii", "plain ascii"},
		{"héllo wörld ✓ 🎉", "héllo wörld ✓ 🎉"},
		{"\x00", `\x00`},
		{"a\x00\x00b", `a\x00\x00b`},
		{"caf\xe9", `caf\xe9`},
		{"\xff\xfe", `\xff\xfe`},
		{"\xe2\x82", `\xe2\x82`},                         // truncated euro sign
		{"\xed\xa0\x80", `\xed\xa0\x80`},                 // an encoded surrogate
		{"\xef\xbf\xbd", "\ufffd"},                       // a real U+FFFD stays
		{`already \x00 escaped`, `already \x00 escaped`}, // backslashes are not escaped
		{"tab\tand\nnewline", "tab\tand\nnewline"},
	}
	for _, tt := range tests {
		if got := SafeText(tt.in); got != tt.want {
			t.Errorf("SafeText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseDueAtShapes(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC)
	tests := []struct {
		name string
		body string
		want *time.Time
	}{
		{"RFC 3339 in UTC", `{"hold_until": "2026-11-30T12:20:00Z"}`, &due},
		{"RFC 3339 with an offset", `{"holdUntil": "2026-11-30T13:20:00+01:00"}`, &due},
		{"Date.toISOString", `{"holdUntil": "2026-11-30T12:20:00.000Z"}`, &due},
		{"epoch milliseconds", `{"holdUntil": 1796041200000}`, &due},
		{"epoch seconds", `{"hold_until": 1796041200}`, &due},
		{"epoch seconds with a fraction", `{"hold_until": 1796041200.25}`, ptr(due.Add(250 * time.Millisecond))},
		{"epoch milliseconds as a float", `{"hold_until": 1.7960412e12}`, &due},
		{"epoch milliseconds in a string", `{"holdUntil": "1796041200000"}`, &due},
		{"epoch seconds in a string", `{"holdUntil": " 1796041200 "}`, &due},
		{"snake_case wins", `{"hold_until": 1796041200, "holdUntil": 0}`, &due},
		// 1e11 is the boundary: seconds below it, milliseconds from it.
		{"just below the boundary is seconds", `{"hold_until": 99999999999}`, ptr(time.Unix(99999999999, 0).UTC())},
		{"the boundary is milliseconds", `{"hold_until": 100000000000}`, ptr(time.UnixMilli(1e11).UTC())},
		{"beyond year 9999 as milliseconds", `{"hold_until": 1e17}`, nil},
		{"not a number", `{"hold_until": 1e400}`, nil},
		{"a boolean", `{"hold_until": true}`, nil},
		{"an object", `{"hold_until": {"$date": 1796041200000}}`, nil},
		{"null", `{"hold_until": null}`, nil},
		// not_before is when the job may run, not its deadline.
		{"notBefore in milliseconds is not the deadline", `{"notBefore": 1796041200000, "not_before": 1796041200}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := Parse(testMessage(tt.body, nil), nil, testIngested)
			switch {
			case tt.want == nil && l.DueAt != nil:
				t.Errorf("DueAt = %v, want none", *l.DueAt)
			case tt.want != nil && (l.DueAt == nil || !l.DueAt.Equal(*tt.want) || l.DueAt.Location() != time.UTC):
				t.Errorf("DueAt = %v, want %v in UTC", l.DueAt, *tt.want)
			}
			if string(l.Payload) != tt.body {
				t.Errorf("Payload = %s, want it as received", l.Payload)
			}
		})
	}
}

// nodeHistory is x-attempt-history as a Node.js worker that calls
// JSON.stringify on it sends it.
const nodeHistory = `[{"timestamp": "2026-11-30T12:18:00.000Z", "errorClass": "ECONNREFUSED", "message": "connect ECONNREFUSED 10.0.0.1:5432"},
 {"time": 1796041140000, "errorClass": "ECONNREFUSED", "message": "attempt 2"},
 {"at": 1796041200, "errorClass": "ETIMEDOUT", "message": "connect ETIMEDOUT 10.0.0.1:5432"}]`

func TestParseAttemptHistoryShapes(t *testing.T) {
	t.Parallel()
	at := func(min, sec int) time.Time { return time.Date(2026, 11, 30, 12, min, sec, 0, time.UTC) }
	type event struct {
		at          time.Time
		class, text string
	}
	nodeEvents := []event{
		{at(18, 0), "ECONNREFUSED", "connect ECONNREFUSED 10.0.0.1:5432"},
		{at(19, 0), "ECONNREFUSED", "attempt 2"},
		{at(20, 0), "ETIMEDOUT", "connect ETIMEDOUT 10.0.0.1:5432"},
	}
	tests := []struct {
		name     string
		history  any
		want     []event
		class    string
		lastErr  string
		category Category
	}{
		{"JSON text in a longstr", nodeHistory, nodeEvents, "ETIMEDOUT", "connect ETIMEDOUT 10.0.0.1:5432", TransientExhausted},
		{"JSON text in a byte array", []byte(nodeHistory), nodeEvents, "ETIMEDOUT", "connect ETIMEDOUT 10.0.0.1:5432", TransientExhausted},
		{"tables with Node.js keys", []any{
			amqp.Table{"timestamp": at(18, 0).Format(time.RFC3339Nano), "error_class": "db_timeout", "message": "one"},
			amqp.Table{"time": at(19, 0).UnixMilli(), "error_class": "db_timeout", "message": "two"},
			amqp.Table{"at": float64(at(20, 0).UnixMilli()) / 1000, "error_class": "db_timeout", "error": "three"},
		}, []event{{at(18, 0), "db_timeout", "one"}, {at(19, 0), "db_timeout", "two"}, {at(20, 0), "db_timeout", "three"}},
			"db_timeout", "three", TransientExhausted},
		{"at wins over timestamp, error over message", []any{
			amqp.Table{"at": at(20, 0), "timestamp": at(10, 0), "error": "the error", "message": "the message"},
		}, []event{{at(20, 0), "", "the error"}}, "", "the error", Unknown},
		{"an unreadable at falls back to timestamp", []any{
			amqp.Table{"at": "later", "timestamp": "2026-11-30T13:20:00+01:00", "error": "x"},
		}, []event{{at(20, 0), "", "x"}}, "", "x", Unknown},
		{"JSON text with an offset and seconds as a string", `[{"time": "2026-11-30T13:19:00+01:00", "message": "a"}, {"time": "1796041200", "message": "b"}]`,
			[]event{{at(19, 0), "", "a"}, {at(20, 0), "", "b"}}, "", "b", Unknown},
		{"JSON text that is not an array", `{"at": 1796042400, "message": "x"}`, []event{}, "", "", Unknown},
		{"text that is not JSON", `attempt 1 failed; attempt 2 failed`, []event{}, "", "", Unknown},
		{"JSON text with entries of the wrong type", `[1, "x", null, {"at": "soon", "message": 7, "errorClass": ["a"]}]`,
			[]event{{}}, "", "", Unknown},
		// An unknown time is unknown: it sorts after every known one and
		// is not taken for the newest when a known entry says something.
		{"unknown times sort last", []any{
			amqp.Table{"error_class": "validation", "error": "no time"},
			amqp.Table{"at": at(20, 0), "error_class": "db_timeout", "error": "newest known"},
			amqp.Table{"at": at(19, 0), "error_class": "db_timeout", "error": "older"},
		}, []event{{at(19, 0), "db_timeout", "older"}, {at(20, 0), "db_timeout", "newest known"}, {time.Time{}, "validation", "no time"}},
			"db_timeout", "newest known", TransientExhausted},
		{"only unknown times keep header order", `[{"message": "first", "errorClass": "a"}, {"message": "second", "errorClass": "validation"}]`,
			[]event{{time.Time{}, "a", "first"}, {time.Time{}, "validation", "second"}}, "validation", "second", Validation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := testMessage(testJob, amqp.Table{"x-attempt-history": tt.history})
			l := Parse(m, nil, testIngested)
			got := []event{}
			for _, e := range l.AttemptHistory {
				if e.Source != "worker" {
					t.Errorf("event from %q", e.Source)
				}
				got = append(got, event{e.At, e.ErrorClass, e.Error})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("history = %+v\nwant %+v", got, tt.want)
			}
			if l.ErrorClass != tt.class || l.LastError != tt.lastErr || l.Category != tt.category {
				t.Errorf("ErrorClass, LastError, Category = %q, %q, %s; want %q, %q, %s",
					l.ErrorClass, l.LastError, l.Category, tt.class, tt.lastErr, tt.category)
			}
			if l.Attempts != max(len(tt.want), 2) {
				t.Errorf("Attempts = %d, want %d", l.Attempts, max(len(tt.want), 2))
			}
			stored, err := DecodeHeaders(l.Headers)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stored["x-attempt-history"], tt.history) {
				t.Errorf("stored x-attempt-history = %#v, want it as received", stored["x-attempt-history"])
			}
		})
	}
}

func TestAttemptEventUnknownTimeInJSON(t *testing.T) {
	t.Parallel()
	h := amqp.Table{
		"x-attempt-history": `[{"message": "no time"}]`,
		"x-death":           []any{amqp.Table{"count": int64(1), "reason": "rejected", "queue": testWorkQueue}},
	}
	l := Parse(testMessage(testJob, h), nil, testIngested)
	history, err := json.Marshal(l.AttemptHistory)
	if err != nil {
		t.Fatal(err)
	}
	deaths, err := json.Marshal(l.Deaths)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{history, deaths} {
		if bytes.Contains(b, []byte("0001-01-01")) || bytes.Contains(b, []byte(`"at"`)) || bytes.Contains(b, []byte(`"time"`)) {
			t.Errorf("an unknown time is written: %s", b)
		}
	}
	var back []AttemptEvent
	if err := json.Unmarshal(history, &back); err != nil || len(back) != 2 || !back[0].At.IsZero() || !back[1].At.IsZero() {
		t.Errorf("read back %+v, %v; want two events of unknown time", back, err)
	}
	// A time stored as null, as a hand-written row might have it, is unknown too.
	var ev AttemptEvent
	if err := json.Unmarshal([]byte(`{"at": null, "source": "worker"}`), &ev); err != nil || !ev.At.IsZero() {
		t.Errorf("null at = %v, %v", ev.At, err)
	}
	if !l.DeadLetteredAt.Equal(testIngested) {
		t.Errorf("DeadLetteredAt = %v, want the capture time when no time is known", l.DeadLetteredAt)
	}
}

func TestParseRetryCounters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers amqp.Table
		want    int
	}{
		{"x-retry-count counts retries", amqp.Table{"x-retry-count": int64(4)}, 5},
		{"x-retries", amqp.Table{"x-retries": int32(5)}, 6},
		{"retry-count as a string", amqp.Table{"retry-count": "6"}, 7},
		{"x-attempt counts attempts", amqp.Table{"x-attempt": float64(7)}, 7},
		{"x-attempt in a byte array", amqp.Table{"x-attempt": []byte("7")}, 7},
		{"the body's attempt when a counter says less", amqp.Table{"x-retry-count": int64(0)}, 2},
		{"x-death when a counter says less", amqp.Table{"x-retry-count": int64(1), "x-death": []any{testDeath("rejected", testWorkQueue, 6, testDied)}}, 6},
		{"the history when a counter says less", amqp.Table{"x-retries": int64(1), "x-attempt-history": `[{}, {}, {}, {}]`}, 4},
		{"the largest counter", amqp.Table{"x-attempt": int64(3), "x-retry-count": int64(8), "x-retries": int64(2)}, 9},
		{"negative and wrong types are ignored", amqp.Table{"x-retry-count": int64(-9), "x-retries": "many", "x-attempt": 2.5, "retry-count": []any{int64(9)}}, 2},
		{"absurd counts are capped", amqp.Table{"x-retry-count": int64(1<<63 - 1)}, 1<<31 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// testJob says attempt 2.
			l := Parse(testMessage(testJob, tt.headers), nil, testIngested)
			if l.Attempts != tt.want {
				t.Errorf("Attempts = %d, want %d", l.Attempts, tt.want)
			}
		})
	}
}

func TestParseMillisecondAMQPTimestamp(t *testing.T) {
	t.Parallel()
	// amqp091-go reads the timestamp property as seconds; amqplib lets a
	// producer put Date.now() there.
	sent := time.Date(2026, 11, 30, 12, 21, 0, 500_000_000, time.UTC)
	tests := []struct {
		name      string
		timestamp time.Time
		headers   amqp.Table
		want      time.Time
	}{
		{"milliseconds on a worker copy", time.Unix(sent.UnixMilli(), 0), amqp.Table{"x-error-class": "ETIMEDOUT"}, sent},
		{"milliseconds without x-death", time.Unix(sent.UnixMilli(), 0), nil, sent},
		{"seconds stay seconds", time.Unix(sent.Unix(), 0), amqp.Table{"x-error-class": "ETIMEDOUT"}, sent.Truncate(time.Second)},
		{"just below the boundary is seconds", time.Unix(99999999999, 0), nil, time.Unix(99999999999, 0)},
		{"milliseconds in an x-death time", time.Time{}, testBrokerHeaders(testDeath("expired", testWorkQueue, 1, time.Unix(sent.UnixMilli(), 0))), sent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := testMessage(testJob, tt.headers)
			m.Timestamp = tt.timestamp
			l := Parse(m, nil, testIngested)
			if !l.DeadLetteredAt.Equal(tt.want) || l.DeadLetteredAt.Location() != time.UTC {
				t.Errorf("DeadLetteredAt = %v, want %v in UTC", l.DeadLetteredAt, tt.want)
			}
		})
	}

	// The fingerprint covers the property as received, not as read: a
	// copy with the timestamp in seconds is another message.
	asSent, asRead := testMessage(testJob, nil), testMessage(testJob, nil)
	asSent.Timestamp, asRead.Timestamp = time.Unix(sent.UnixMilli(), 0), sent
	if Parse(asSent, nil, testIngested).Fingerprint == Parse(asRead, nil, testIngested).Fingerprint {
		t.Errorf("the fingerprint hashes the corrected timestamp, not the one received")
	}
}

func TestParseNodeErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers amqp.Table
	}{
		{"x-error-class", amqp.Table{"x-error-class": "ECONNREFUSED", "x-last-error": "connect ECONNREFUSED 10.0.0.1:5432"}},
		{"x-last-error only", amqp.Table{"x-last-error": "Error: connect ETIMEDOUT 10.0.0.1:5432\n    at TCPConnectWrap.afterConnect"}},
		{"a generic class and a code in the text", amqp.Table{"x-error-class": "Error", "x-last-error": "getaddrinfo EAI_AGAIN db.internal"}},
		{"the history only", amqp.Table{"x-attempt-history": `[{"at": 1796042400000, "errorClass": "ECONNRESET", "message": "read ECONNRESET"}]`}},
		{"over broker-expired retry hops", amqp.Table{"x-error-class": "EPIPE", "x-death": []any{testDeath("expired", testRetry, 3, testDied)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if l := Parse(testMessage(testJob, tt.headers), nil, testIngested); l.Category != TransientExhausted {
				t.Errorf("Category = %s, want %s", l.Category, TransientExhausted)
			}
		})
	}
}

func TestPayloadProblemSaysWhy(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(testJob))
	_ = zw.Close()
	var gzNotJSON bytes.Buffer
	zw = gzip.NewWriter(&gzNotJSON)
	_, _ = zw.Write([]byte("expire r-8421"))
	_ = zw.Close()
	tests := []struct {
		name, encoding string
		body           []byte
		want           string
	}{
		{"a job", "", []byte(testJob), ""},
		{"a gzip job, labelled", "gzip", gz.Bytes(), ""},
		{"a gzip job, unlabelled", "", gz.Bytes(), fmt.Sprintf("body is not JSON: %d bytes of binary data", gz.Len())},
		{"gzip that does not inflate, read as it is", "gzip", []byte(testJob), ""},
		{"gzip that does not inflate, nor reads", "gzip", []byte("not gzip"), "labelled gzip but does not inflate; body is not JSON: "},
		{"gzip text that is not JSON", "gzip", gzNotJSON.Bytes(), "body is not JSON: invalid character 'e' looking for beginning of value (at byte 1 of 13)"},
		{"empty", "", nil, "empty body"},
		{"truncated JSON", "", []byte(`{"reservation_id": "r-1"`), "body is not JSON: unexpected end of JSON input (at byte 24 of 24)"},
		{"an array", "", []byte(`[1]`), "body is JSON but not an object (3 bytes)"},
		{"null", "", []byte(`null`), "body is JSON null, not an object"},
		{"invalid UTF-8", "", []byte("{\"a\": \"\xff\"}"), "body is not JSON: 10 bytes of binary data"},
	}
	for _, tt := range tests {
		got := PayloadProblem(tt.body, tt.encoding)
		if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		if (got != "") != PayloadMalformed(readableBody(Message{Body: tt.body, ContentEncoding: tt.encoding})) {
			t.Errorf("%s: PayloadProblem %q disagrees with PayloadMalformed", tt.name, got)
		}
	}
}
