package deadletter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Category is a triage grouping of dead letters by why they died.
type Category string

// The reason categories. The default mapping from error classes and x-death
// reasons lives in DefaultClassifier; a config file may override it.
const (
	TransientExhausted Category = "transient-exhausted"
	Validation         Category = "validation"
	NotFound           Category = "not-found"
	Conflict           Category = "conflict"
	Malformed          Category = "malformed"
	BrokerExpired      Category = "broker-expired"
	BrokerLimit        Category = "broker-limit"
	Unknown            Category = "unknown"
)

// Categories lists every category in triage order.
func Categories() []Category {
	return []Category{TransientExhausted, Validation, NotFound, Conflict, Malformed, BrokerExpired, BrokerLimit, Unknown}
}

// PermanentCategories are the reason categories a retry cannot fix: the
// job's data is wrong or gone, or its version moved on. Their overdue
// letters are shown apart and page nobody; a replay request holding any of
// them is refused unless it says so. The schema's permanent_categories()
// lists the same.
func PermanentCategories() []Category {
	return []Category{Conflict, Validation, Malformed, NotFound}
}

// Permanent says whether a retry cannot fix a letter of c.
func (c Category) Permanent() bool { return slices.Contains(PermanentCategories(), c) }

// HoldMovedOn says whether a letter of c no longer speaks for a hold still
// held: its reservation's version moved on (conflict: a later version's
// hold is that version's job's), or the reservation is gone (not-found).
// A validation or malformed letter's hold stays held, and so does a
// letter's a retry can fix.
func (c Category) HoldMovedOn() bool { return c == Conflict || c == NotFound }

// PermanentCategoryNames are PermanentCategories as text, for a query.
func PermanentCategoryNames() []string {
	names := make([]string, 0, 4)
	for _, c := range PermanentCategories() {
		names = append(names, string(c))
	}
	return names
}

// ParseCategory returns the category named s, or an error that lists the
// valid names.
func ParseCategory(s string) (Category, error) {
	for _, c := range Categories() {
		if string(c) == s {
			return c, nil
		}
	}
	names := make([]string, 0, len(Categories()))
	for _, c := range Categories() {
		names = append(names, string(c))
	}
	return "", fmt.Errorf("unknown reason category %q: valid categories are %s", s, strings.Join(names, ", "))
}

// Status is where a dead letter stands in its life after capture.
type Status string

// The statuses a dead letter moves through.
const (
	StatusDead      Status = "dead"
	StatusInRequest Status = "in_request"
	StatusReplayed  Status = "replayed"
	StatusDiscarded Status = "discarded"
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{StatusDead, StatusInRequest, StatusReplayed, StatusDiscarded}
}

// ParseStatus returns the status named s, or an error that lists the valid
// names.
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses() {
		if string(st) == s {
			return st, nil
		}
	}
	names := make([]string, 0, len(Statuses()))
	for _, st := range Statuses() {
		names = append(names, string(st))
	}
	return "", fmt.Errorf("unknown status %q: valid statuses are %s", s, strings.Join(names, ", "))
}

// Message is one delivery from a dead-letter queue, as the broker handed it
// over, independent of the AMQP client library.
type Message struct {
	// Queue is the dead-letter queue the message was read from.
	Queue string
	// Body is the payload, byte for byte.
	Body []byte
	// Headers holds the AMQP header table with amqp091-go's value types:
	// nil, bool, byte, int8, int16, int32, int64, float32, float64, string,
	// []byte, time.Time, amqp091.Decimal, nested tables and []any.
	Headers map[string]any
	// The AMQP basic properties, as amqp091-go's Delivery has them: an
	// empty string or a zero number was not sent, and the zero time is no
	// timestamp.
	ContentType     string
	ContentEncoding string
	DeliveryMode    uint8
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string
	MessageID       string
	Timestamp       time.Time
	Type            string
	UserID          string
	AppID           string

	// System is the queue system the message came from; empty means
	// RabbitMQ.
	System System
	// Native holds the system's own attributes of the message by their
	// names in that system, as received: for SQS its system attributes
	// (MessageId, ApproximateReceiveCount, SentTimestamp,
	// DeadLetterQueueSourceArn, MessageGroupId, …). RabbitMQ's are the
	// basic properties above instead.
	Native map[string]string
	// Stored says the message is a failed job its store keeps
	// (StoredJob.Message): its job id and incarnation are its
	// dead-lettering, and a replay retries it where it is.
	Stored bool
	// Origin is the queue the message failed in, in the form its system
	// names queues, where the driver read it from what the message says
	// in another form (a queue's URL or bare name in x-original-queue);
	// it is taken before x-original-queue.
	Origin string
	// RedriveSource is, for a DLQ that only one queue redrives to, that
	// queue: the origin of a letter that names none.
	RedriveSource string
}

// Letter is a parsed, classified dead letter, ready to be stored.
type Letter struct {
	// Fingerprint identifies this dead-lettering: a redelivered or duplicated
	// copy of the same DLQ message has the same fingerprint.
	Fingerprint [32]byte
	// JobKey names the job across incarnations: the idempotency key, else the
	// message id. A later letter with the same JobKey links to the earlier one.
	JobKey string

	// System is the queue system the letter was captured from.
	System System
	// Connection is the name of the connection it was captured from,
	// which only the operator's configuration turns into a server; empty:
	// the archive's rule (a job store's letter's is its queue name's,
	// otherwise the name of its system).
	Connection string
	// Native is the system's own attributes of the message (see
	// Message.Native) in the JSON the archive stores; nil for none.
	Native json.RawMessage

	MessageID       string
	ReservationID   string
	IdempotencyKey  string
	ExpectedVersion *int64
	// DueAt is the business deadline (hold_until) the job was to act on,
	// given as RFC 3339 or as unix seconds or milliseconds.
	DueAt *time.Time

	// SourceQueue is the DLQ it was captured from; OriginQueue the queue it
	// died in (first x-death entry); OriginalExchange and OriginalRoutingKey
	// where the job was first published, which replay sends it back to.
	SourceQueue        string
	OriginQueue        string
	OriginalExchange   string
	OriginalRoutingKey string

	Category   Category
	ErrorClass string
	LastError  string
	// Attempts is the best count of processing attempts any source gives:
	// the body's attempt, x-attempt-history, x-death rejections,
	// x-delivery-count and the retry counters (x-attempt, x-retry-count,
	// x-retries, retry-count), whichever says most.
	Attempts int
	// AttemptHistory is the timeline: the worker's attempts and the broker's
	// dead-letterings, oldest first, then those whose time is unknown.
	AttemptHistory []AttemptEvent
	// Deaths is the decoded x-death header, as RabbitMQ wrote it.
	Deaths []Death

	// Headers is the header table in expiryctl's lossless JSON encoding
	// (see EncodeHeaders).
	Headers     json.RawMessage
	ContentType string
	// Properties are all the basic properties as received, which replay
	// sends again; nil for a letter stored without them, as letters
	// captured before they were recorded are.
	Properties  *Properties
	Payload     []byte
	PayloadHash [32]byte

	DeadLetteredAt time.Time
	// ReplayRequestID and ReplayCount come from x-replay-request and
	// x-replay-count when a replayed job died again.
	ReplayRequestID *int64
	ReplayCount     int
}

// AttemptEvent is one entry of a letter's timeline.
type AttemptEvent struct {
	// At is when it happened; the zero time means unknown, and is left out
	// of the JSON rather than written as year 1.
	At time.Time `json:"at,omitzero"`
	// Source is "worker" for x-attempt-history entries and "broker" for x-death.
	Source     string `json:"source"`
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Attempt and Trace are a job store's: which attempt failed, and the
	// stack it failed with.
	Attempt int    `json:"attempt,omitempty"`
	Trace   string `json:"trace,omitempty"`
	// Reason, Queue and Count describe a broker dead-lettering.
	Reason string `json:"reason,omitempty"`
	Queue  string `json:"queue,omitempty"`
	Count  int64  `json:"count,omitempty"`
}

// Death is one entry of RabbitMQ's x-death header.
type Death struct {
	Count       int64    `json:"count"`
	Reason      string   `json:"reason"`
	Queue       string   `json:"queue"`
	Exchange    string   `json:"exchange"`
	RoutingKeys []string `json:"routing_keys"`
	// Time is the entry's time; the zero time means unknown, and is left
	// out of the JSON.
	Time time.Time `json:"time,omitzero"`
}
