package replay

import (
	"encoding/json"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// runItem is one frozen item of a request with its letter, as read for a
// run or a dry run.
type runItem struct {
	id              int64
	ordinal         int
	state           string
	frozenHash      []byte
	hash            []byte
	redacted        bool
	letterStatus    string
	reingested      bool
	reservationID   string
	idempotencyKey  string
	expectedVersion *int64
	// hasTarget, exchange and routingKey are where the item goes
	// (replay_target_of); originQueue is where its letter first died.
	hasTarget   bool
	exchange    string
	routingKey  string
	originQueue string
	contentType string
	messageID   string
	properties  []byte // nil when the letter's were not recorded
	headers     json.RawMessage
	payload     []byte
	replayCount int
	// notBefore, by the runner's clock, is when the item may be published
	// (the request's --not-before, its letter's Retry-After, its hold's
	// deadline); zero: now.
	notBefore time.Time
	// system is the queue system the letter came from, which the message
	// goes back to; groupID the message group it was received in, "" for
	// none.
	system deadletter.System
	// inPlace: the letter's system retries its jobs where they are, as
	// the archive describes the system (queue_systems), rather than
	// publishing a copy.
	inPlace bool
	groupID string
	// job is, for a job store's letter, the job and the failure of it
	// the letter captured.
	job JobRef
	// maxDelay is the longest its target queue holds a single message
	// (Delayer); 0: the run holds the item until its time itself.
	maxDelay time.Duration
}

// sendFrom is when the run may send the item: its notBefore, or, for a
// queue that delays single messages, up to maxDelay before it, the message
// carrying the rest of the wait.
func (it *runItem) sendFrom() time.Time {
	if it.notBefore.IsZero() || !it.delayable() {
		return it.notBefore
	}
	return it.notBefore.Add(-it.maxDelay)
}

// delayable says whether the item goes to a queue that delays a single
// message.
func (it *runItem) delayable() bool { return it.maxDelay > 0 }

// target is where a replay sends the item, as the database reads it with
// the item (replay_target_of): by default the work queue its letter failed
// in, through the default exchange; with --via-exchange its original
// exchange and routing key.
func (it *runItem) target() (exchange, key string, ok bool) {
	return it.exchange, it.routingKey, it.hasTarget
}

// changed says how the letter changed since its request was frozen (as
// replay_cohort_changes does in the database), or "".
func (it *runItem) changed() string {
	switch {
	case it.redacted:
		return "redacted by retention"
	case string(it.hash) != string(it.frozenHash):
		return "payload changed since the cohort was frozen"
	case it.letterStatus == "discarded":
		return "discarded"
	case it.reingested:
		return "dead-lettered again since the cohort was frozen (a newer letter of the job exists)"
	}
	return ""
}

// depthQueue is the queue a replay of the item fills whose depth is the
// headroom stop condition: the target queue when the item is routed by
// queue name, else (through an exchange) the work queue of the queue it
// died in (a letter that went through retries died in a retry queue, but
// its replay lands in the work queue); "" when neither is known. The plan
// names its target queues by the same rule (ItemsPlanInputs).
func (it *runItem) depthQueue() string {
	switch {
	case it.hasTarget && it.exchange == "":
		return it.routingKey
	case it.originQueue != "":
		return WorkQueueOf(it.originQueue)
	}
	return ""
}
