package metrics

import (
	"context"
	"time"
)

// Source gives an Exporter its numbers. Snapshot reads all of them at once;
// the Exporter calls it once per refresh interval, never per scrape, so it
// may cost a few queries.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Snapshot is the state of the archive, the replays and the live queues at
// one time, in plain numbers. A nil pointer field is a signal the source
// could not read (not wired yet, or unreachable): the Exporter exports
// nothing for it, and says so in expiryctl_metrics_signal_available.
type Snapshot struct {
	// Categories are the archive's letters per reason category, for each
	// category that holds any.
	Categories []CategoryLetters
	// ErrorClasses counts the waiting letters per error class; nil when not
	// available.
	ErrorClasses *ClassCounts
	// Overdue are the holds past their deadline; nil when not available.
	Overdue *OverdueHolds
	// Holds are the holds past their deadline at their source, the
	// reservation database; nil when the policy sets no gap query.
	Holds *HoldsAtSource
	// Queues is what the live queues hold; nil when the source has no way to
	// read them.
	Queues *LiveQueues
	// Replay is how the replay and discard requests stand; nil when not
	// available.
	Replay *ReplayState
	// Audit is how far the newest signed checkpoint covers the audit
	// trail; nil when not available (a login that cannot read the trail).
	Audit *AuditCover
	// Missing says, for the operator, which signals are left out and why.
	Missing []string
}

// AuditCover is how far the newest signed checkpoint covers the audit
// trail: rows after it are protected by the hash chain alone.
type AuditCover struct {
	Rows, Checkpointed int64
	// NewestCheckpoint is when the newest checkpoint was stored; zero when
	// none was.
	NewestCheckpoint time.Time
}

// CategoryLetters is one reason category's letters.
type CategoryLetters struct {
	Category string
	// Waiting are the letters still waiting for a decision: dead, or held by
	// an open request.
	Waiting int64
	// Ingested are all the letters of the category the archive captured,
	// including those replayed or discarded since.
	Ingested int64
	// OldestWaiting is when the oldest waiting letter was dead-lettered;
	// zero when none waits.
	OldestWaiting time.Time
	// ByStatus counts the category's letters per status (dead,
	// in_request, replayed, discarded).
	ByStatus map[string]int64
}

// ClassCounts counts waiting letters per error class, as the letters name
// it (x-error-class). The classes come from messages, so the Exporter
// exports only the most frequent and sums the rest as "other".
type ClassCounts struct {
	Waiting map[string]int64
}

// OverdueHolds are the waiting letters whose hold deadline (due_at) has
// passed: the reservations that should have expired and have not.
type OverdueHolds struct {
	// Count are those a retry can fix, the figure that pages.
	Count int64
	// P50, P99 and Max are how far past their deadline they are.
	P50, P99, Max time.Duration
	// ByCategory counts them per reason category, the permanent
	// categories' (which no retry fixes, and which page nobody) too.
	ByCategory []OverdueCategory
}

// OverdueCategory is one reason category's overdue letters.
type OverdueCategory struct {
	Category  string
	Permanent bool
	Count     int64
}

// HoldsAtSource is what the reservation database itself says of its holds
// past their deadline (the policy's gap query): Up is false when it could
// not be read, and the counts are then left out.
type HoldsAtSource struct {
	Up           bool
	PastDeadline int64
	// OldestLate is how far past its deadline the oldest is; zero when
	// none is.
	OldestLate time.Duration
}

// LiveQueues is what the expiry topology's queues hold, read from
// RabbitMQ's management API. When it could not be read, Unavailable says
// why and Queues is empty.
type LiveQueues struct {
	Unavailable string
	Queues      []QueueState
}

// QueueState is one queue of the topology. Role is "work", "retry" or
// "dead-letter"; the names are the topology's few queues, never a
// message's.
type QueueState struct {
	Name      string
	Role      string
	Ready     int64
	Unacked   int64
	Consumers int
	// ConsumersUnseen: the system shows nobody consuming the queue, so
	// Consumers is not exported for it (0 would say nobody works it).
	ConsumersUnseen bool
	// PublishRate, DeliverRate and AckRate are messages per second over the
	// broker's sampling window; nil when the broker reported none.
	PublishRate, DeliverRate, AckRate *float64
	// HeadAge is how long the head message has waited, where the broker
	// knows it; nil otherwise. HeadAgeEstimated marks an estimate (a
	// quorum queue's ready messages over its ack rate), exported apart.
	HeadAge          *time.Duration
	HeadAgeEstimated bool
}

// ReplayState is how the replay and discard requests stand. Only open
// requests are named, so the series follow how many are open, not the
// history.
type ReplayState struct {
	// Requests counts the open requests by status.
	Requests map[string]int64
	// Items counts the open requests' items by their request's status, then
	// by their own state.
	Items map[string]map[string]int64
	// OpenRequests are the open requests' items by request, newest first.
	OpenRequests []RequestItems
	// Published counts the items the broker confirmed, of every request
	// ever run; it only grows.
	Published int64
	// Halts counts the runs a stop condition halted, of every request
	// ever run, by condition; it only grows.
	Halts map[string]int64
}

// RequestItems are one open request's items by state.
type RequestItems struct {
	ID     int64
	Status string
	States map[string]int64
	// Outcomes counts its confirmed items by what became of them:
	// came_back, settled, unknown; nil before it confirmed any.
	Outcomes map[string]int64
}
