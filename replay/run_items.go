package replay

import (
	"encoding/json"
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
	hasOrigin       bool
	exchange        string
	routingKey      string
	originQueue     string
	contentType     string
	messageID       string
	properties      []byte // nil when the letter's were not recorded
	headers         json.RawMessage
	payload         []byte
	replayCount     int
}

// target is where a replay sends the item: its original exchange and routing
// key, else the queue it died in (through the default exchange), else the
// request's own target.
func (it *runItem) target(req Request) (exchange, key string, ok bool) {
	switch {
	case it.hasOrigin:
		return it.exchange, it.routingKey, true
	case it.originQueue != "":
		return "", it.originQueue, true
	case req.ToExchange != "" || req.ToRoutingKey != "":
		return req.ToExchange, req.ToRoutingKey, true
	}
	return "", "", false
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
// queue name, else the work queue of the queue it died in (a letter that
// went through retries died in a retry queue, but its replay lands in the
// work queue); "" when neither is known.
func (it *runItem) depthQueue(req Request) string {
	switch {
	case it.hasOrigin && it.exchange == "":
		return it.routingKey
	case it.hasOrigin || it.originQueue != "":
		return WorkQueueOf(it.originQueue)
	case req.ToExchange == "":
		return req.ToRoutingKey
	}
	return ""
}
