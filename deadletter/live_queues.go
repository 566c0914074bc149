package deadletter

import "time"

// QueueRole is what a queue of the expiry topology is for.
type QueueRole string

// The roles of the topology's queues: work waits in the work queue
// (ready) or is being handled (in flight), waits out a backoff in a retry
// queue (scheduled), or is isolated in the dead-letter queue.
const (
	RoleWork       QueueRole = "work"
	RoleRetry      QueueRole = "retry"
	RoleDeadLetter QueueRole = "dead-letter"
)

// QueueState is what one queue holds now, as the broker reports it (for
// RabbitMQ, its management API). The live queues are read from the broker,
// never from the archive: they are what `dlq summary` shows beside it.
type QueueState struct {
	Name string    `json:"name"`
	Role QueueRole `json:"role"`
	// Ready are messages waiting for a consumer; Unacked are delivered and
	// not yet acknowledged (in flight).
	Ready     int64 `json:"ready"`
	Unacked   int64 `json:"unacked"`
	Consumers int   `json:"consumers"`
	// ConsumersUnseen: the system shows nobody consuming its queues (a
	// job store's workers, a cloud queue's consumers leave no trace), so Consumers
	// is 0 because nothing can say, not because nothing works the queue.
	ConsumersUnseen bool `json:"consumers_unseen,omitempty"`
	// Rates are per second, over the management API's sampling window;
	// nil when the broker reported none (no traffic since it started
	// sampling).
	PublishRate *float64 `json:"publish_rate,omitempty"`
	DeliverRate *float64 `json:"deliver_rate,omitempty"`
	AckRate     *float64 `json:"ack_rate,omitempty"`
	// HeadAge is how long the message at the head of the queue has waited,
	// where the broker knows it (the message carries a timestamp); nil
	// otherwise. HeadAgeEstimated says it is an estimate instead: a quorum
	// queue reports no head timestamp, and its ready messages over its ack
	// rate (Little's law: the wait of a queue drained at that rate) stand
	// in for it.
	HeadAge          *time.Duration `json:"-"`
	HeadAgeEstimated bool           `json:"head_age_estimated,omitempty"`
	// ClassicVersion is a RabbitMQ classic queue's storage version (1 or
	// 2, as RabbitMQ 3.10 and later report it); 0 for another kind of
	// queue, or when the broker did not say.
	ClassicVersion int `json:"classic_queue_version,omitempty"`
}

// PagesUnderCapture says whether q is a dead-letter queue whose storage
// costs the broker more while a capture runs behind its producers: a
// classic queue of version 1 pages its messages to disk then, and in the
// bench RabbitMQ's CPU a letter swung between 26 and 49 µs from run to
// run, where version 2 held at 27–28 µs (docs/operations.md).
func (q QueueState) PagesUnderCapture() bool {
	return q.Role == RoleDeadLetter && q.ClassicVersion == 1
}

// QueueReport is the live state of a work queue's topology. When the
// management API could not be read, Queues is empty and Unavailable says
// why (with any password redacted), so that a caller shows the rest of what
// it knows and says what is missing.
type QueueReport struct {
	Queues      []QueueState `json:"queues"`
	Unavailable string       `json:"unavailable,omitempty"`
	// Note is what a reader should know of the counts, in the system's
	// words (how old they may be); empty for nothing.
	Note string `json:"note,omitempty"`
}

// ConsumersUnseen is r with every queue marked as a system's that shows
// nobody consuming it.
func (r QueueReport) ConsumersUnseen() QueueReport {
	queues := make([]QueueState, len(r.Queues))
	for i, q := range r.Queues {
		q.ConsumersUnseen = true
		queues[i] = q
	}
	r.Queues = queues
	return r
}

// WorkStates are a topology's queues summed into the states of work.
type WorkStates struct {
	// Scheduled are messages waiting out a backoff in RetryQueues retry
	// queues.
	Scheduled   int64
	RetryQueues int
	// Ready and InFlight are the work queue's ready and unacknowledged
	// messages, Consumers its consumers, ReadyHeadAge its head's age.
	Ready, InFlight       int64
	Consumers             int
	ConsumersUnseen       bool
	ReadyHeadAge          *time.Duration
	ReadyHeadAgeEstimated bool
	// Isolated are the messages in the dead-letter queue, not yet
	// captured; IsolatedHeadAge is its head's age.
	Isolated                 int64
	IsolatedHeadAge          *time.Duration
	IsolatedHeadAgeEstimated bool
}

// States sums the report's queues into the states of work. A message is
// counted once, whether ready or delivered: a retry queue's and the DLQ's
// unacknowledged messages are still scheduled or isolated.
func (r QueueReport) States() WorkStates {
	var s WorkStates
	for _, q := range r.Queues {
		switch q.Role {
		case RoleWork:
			s.Ready += q.Ready
			s.InFlight += q.Unacked
			s.Consumers += q.Consumers
			s.ConsumersUnseen = s.ConsumersUnseen || q.ConsumersUnseen
			s.ReadyHeadAge, s.ReadyHeadAgeEstimated = q.HeadAge, q.HeadAgeEstimated
		case RoleRetry:
			s.Scheduled += q.Ready + q.Unacked
			s.RetryQueues++
		case RoleDeadLetter:
			s.Isolated += q.Ready + q.Unacked
			s.IsolatedHeadAge, s.IsolatedHeadAgeEstimated = q.HeadAge, q.HeadAgeEstimated
		}
	}
	return s
}
