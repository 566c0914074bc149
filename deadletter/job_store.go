package deadletter

import (
	"encoding/json"
	"strconv"
	"time"
)

// StoredJob is a failed job as a job store keeps it (a River row in state
// discarded, a BullMQ job in a queue's failed set, a row of a team's jobs
// table in a failed state), read by a driver and
// turned into the Message that capture parses, with Message. The store
// is never changed by the read.
type StoredJob struct {
	// System is River, BullMQ or JobTable.
	System System
	// Queue is the source's name without credentials (see
	// RiverQueuePrefix): what the letter's queue column says.
	Queue string
	// ID is the job's id in its store, as text.
	ID string
	// Incarnation is what tells this failure of the job from the next
	// one after a retry: River's finalized_at, BullMQ's finishedOn, a
	// jobs table's failed_at and attempts, as the store gives them. The job's id and its incarnation are the
	// letter's identity; a replay retries the job only while its store
	// still holds this incarnation.
	Incarnation string
	// Kind is River's kind or BullMQ's job name.
	Kind string
	// Payload is River's args or BullMQ's data, byte for byte.
	Payload []byte
	// FailedAt is when the job failed for good.
	FailedAt time.Time
	// Attempts is how many times it ran (River's attempt, BullMQ's
	// attemptsMade); MaxAttempts is its budget, 0 when unknown.
	Attempts, MaxAttempts int
	// Errors is the attempt history, oldest first.
	Errors []JobError
	// LastError is the store's own account of the last failure when it
	// keeps one apart from Errors (BullMQ's failedReason); empty: the
	// last of Errors.
	LastError string
	// Replay is what an earlier replay by expiryctl wrote on the job (the
	// x-replay-* headers of replay.Message), so that a job that dies
	// again links to that replay; nil when none did.
	Replay map[string]any
	// Native holds the rest of what the store keeps, by its names in that
	// store, as text (JSON for structured values).
	Native map[string]string
}

// JobError is one failed attempt of a stored job.
type JobError struct {
	Attempt int
	At      time.Time
	Error   string
	Trace   string
}

// Native keys every job-store letter carries, besides the store's own.
const (
	NativeJobID       = "job_id"
	NativeIncarnation = "incarnation"
	NativeKind        = "kind"
	NativeMaxAttempts = "max_attempts"
)

// Message is the job as capture parses it. A store has no headers; the
// job's history travels in the message contract's: x-last-error,
// x-attempt-history (with each attempt's number and trace), x-attempt,
// and what an earlier replay wrote on the job (x-replay-request, …).
// The job's id is the message id; Timestamp is when it failed for good.
func (j StoredJob) Message() Message {
	headers := map[string]any{"x-attempt": int64(j.Attempts)}
	history := make([]any, 0, len(j.Errors))
	for _, e := range j.Errors {
		entry := map[string]any{"error": e.Error}
		if e.Attempt > 0 {
			entry["attempt"] = int64(e.Attempt)
		}
		if !e.At.IsZero() {
			entry["at"] = e.At.UTC().Format(time.RFC3339Nano)
		}
		if e.Trace != "" {
			entry["trace"] = e.Trace
		}
		history = append(history, entry)
	}
	if len(history) > 0 {
		headers[headerAttemptHistory] = history
	}
	last := j.LastError
	if last == "" && len(j.Errors) > 0 {
		last = j.Errors[len(j.Errors)-1].Error
	}
	if last != "" {
		headers[headerLastError] = last
	}
	for k, v := range j.Replay {
		headers[k] = v
	}
	native := make(map[string]string, len(j.Native)+4)
	for k, v := range j.Native {
		native[k] = v
	}
	native[NativeJobID] = j.ID
	native[NativeIncarnation] = j.Incarnation
	native[NativeKind] = j.Kind
	if j.MaxAttempts > 0 {
		native[NativeMaxAttempts] = strconv.Itoa(j.MaxAttempts)
	}
	m := Message{
		Queue:     j.Queue,
		Body:      j.Payload,
		Headers:   headers,
		MessageID: j.ID,
		Type:      j.Kind,
		Timestamp: j.FailedAt,
		System:    j.System,
		Native:    native,
		Stored:    true,
	}
	if json.Valid(j.Payload) {
		m.ContentType = "application/json"
	}
	return m
}
