package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Message is one replayed job as the runner hands it to a Broker.
type Message struct {
	// Item is the dead letter id the message replays; it travels as the
	// x-replay-item header and is how a broker's return is matched to it.
	Item int64
	// System is the queue system the message goes to.
	System deadletter.System
	// Exchange and RoutingKey are where it goes: a route ("" is the
	// default, where the routing key names a queue; see Routes) and a
	// queue, as the system names it.
	Exchange, RoutingKey string
	// Headers are what the message carries besides its body, with the
	// replay's marks: a copy's headers as its driver encoded them, or,
	// for a job retried in place, the marks the driver writes on the job.
	Headers map[string]any
	Body    []byte
	// MessageID is the id the message is sent with, where its system
	// sends one; for people (a dry run's plan).
	MessageID string
	// NotBefore, for a system that holds a single message until a time
	// (Traits of its driver), is when it may be delivered. Zero: at once.
	NotBefore time.Time
	// Job is, for a system that retries a job where it is (a job store,
	// as the archive's queue_systems says), the job to retry:
	// RoutingKey is then the letter's own queue and Headers the replay's
	// x-replay-* marks, which the driver writes on the job as it retries
	// it, so that a job that dies again links to this replay.
	Job JobRef
	// Wire is what only the driver that encoded the message reads: its
	// system's own fields (Encoder).
	Wire any
}

// Copy is a letter as the archive keeps it, for a driver whose replays
// send copies to build the message that replays it (Encoder).
type Copy struct {
	Item                 int64
	System               deadletter.System
	Exchange, RoutingKey string
	// Headers are the letter's headers as stored (deadletter's JSON with
	// their wire types), its failure bookkeeping already cut out.
	Headers json.RawMessage
	// Properties are its wire properties as stored, nil for a letter
	// captured before they were; ContentType and MessageID are what its
	// columns keep of them.
	Properties             json.RawMessage
	ContentType, MessageID string
	// GroupID is the message group it was received in, "" for none.
	GroupID string
	// Body is the body to send: the letter's, or, for a fresh-key
	// request, with the key FreshKey gives it.
	Body []byte
	// Request is the replay request; FreshKeys says it gives each job a
	// new idempotency key (FreshKey), which a message id carries too.
	Request   int64
	FreshKeys bool
	// Marks are the headers naming the replay, most needed first: the
	// first MarksRequired link a job that dies again to this replay, and
	// a message that cannot carry them cannot go.
	Marks []Mark
	// NotBefore is the message's NotBefore.
	NotBefore time.Time
}

// Mark is one header naming a replay: its value is an int64, a string or
// a time.Time, which each driver writes in its system's types.
type Mark struct {
	Name  string
	Value any
}

// MarksRequired is how many of a Copy's Marks a message must carry.
const MarksRequired = 2

// Encoder is a Broker whose replays send copies: it builds each copy's
// message in its system's wire form. The runner asks it of every letter
// it does not retry in place.
type Encoder interface {
	// Encode builds the message that replays c; an error says why the
	// letter cannot be sent as it is (the item is blocked).
	Encode(c Copy) (Message, error)
}

// JobRef names a failed job in its store: its id and the incarnation the
// letter captured (deadletter.StoredJob). A driver retries the job only
// while its store still holds that incarnation, in one atomic step with
// writing the replay's marks; a job whose marks already name this item of
// this request was retried by an earlier publish of it, and the publish is
// confirmed without retrying again.
type JobRef struct {
	ID, Incarnation string
}

// JobMovedOnError is a job store's answer that the job is no longer the
// failed job the letter captured: someone retried or deleted it, or it
// failed again since. The runner skips the item and says why.
type JobMovedOnError struct {
	JobID string
	// Now says what the store holds instead: "deleted", "state available",
	// "failed again at …".
	Now string
}

func (e *JobMovedOnError) Error() string {
	return fmt.Sprintf("job %s is no longer the failed job captured (%s): someone else retried, removed or re-ran it; skipped", e.JobID, e.Now)
}

// Broker is what the runner needs from the queue system it sends to or
// retries in: each driver implements it; a benchmark or test may wrap
// it.
type Broker interface {
	// Publish sends m as mandatory and persistent on a confirm-mode channel
	// and returns at once; the Pending settles when the broker answers. An
	// error means the channel or connection is gone and nothing more can be
	// published on it.
	Publish(ctx context.Context, m Message) (Pending, error)
	// QueueDepth returns the messages ready in queue; exists is false when
	// there is no such queue.
	QueueDepth(ctx context.Context, queue string) (depth int, exists bool, err error)
	// Close releases the broker's channels, not the connection.
	Close() error
}

// Delayer is a Broker whose system holds a single message until a time,
// up to MaxDelay ahead: the run sends such an item that much before its
// time, its message carrying the rest of the wait (Message.NotBefore), and
// the database clears it that early (Tables.ItemsSend's delayed).
type Delayer interface {
	// MaxDelay is the longest delay queue gives a single message; 0 for
	// a queue that delays none.
	MaxDelay(queue string) time.Duration
}

// Routes is a Broker whose messages go through a route the run names,
// which may not exist (an exchange): the planner asks once per route and
// run, and fails the items of a missing one. A Broker that is not one sends
// each message to the queue its target names.
type Routes interface {
	// RouteExists reports whether route exists. The default route ("")
	// always does.
	RouteExists(ctx context.Context, route string) (bool, error)
}

// Pending is a published message waiting for the broker's answer.
type Pending interface {
	// Done is closed once the broker acked or nacked the message, or its
	// channel closed.
	Done() <-chan struct{}
	// Outcome, after Done, is nil when the broker acked the message and did
	// not return it; a *PublishFailure when it was returned as unroutable or
	// nacked; a *BrokerLostError when the channel closed first, so nobody
	// knows whether the message reached a queue.
	Outcome() error
}

// PublishFailure is the broker's definite no: the message was returned as
// unroutable (mandatory) or nacked. The item failed; it can be retried.
type PublishFailure struct {
	Exchange, RoutingKey string
	Reason               string
}

// Error names a queue alone when no exchange routed the message.
func (e *PublishFailure) Error() string {
	if e.Exchange == "" {
		return fmt.Sprintf("queue %q: %s", e.RoutingKey, e.Reason)
	}
	return fmt.Sprintf("exchange %q routing key %q: %s", e.Exchange, e.RoutingKey, e.Reason)
}

// BrokerLostError means the connection to the queue system was lost
// while something was in flight (a publishing channel, a call to a
// cloud queue, a retry's transaction): what was in flight may or may not have reached a
// queue. Err says which, in the queue system's words.
type BrokerLostError struct{ Err error }

func (e *BrokerLostError) Error() string {
	return fmt.Sprintf("lost the queue system before it answered: %v", e.Err)
}

func (e *BrokerLostError) Unwrap() error { return e.Err }
