package bullmq

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// MarkField is the job hash field where a replay writes its marks (the
// x-replay-* headers, as a JSON object) as it retries the job. BullMQ
// ignores fields it does not know, and keeps this one through the retry
// and a later failure, so a job that dies again links to the replay.
const MarkField = "expiryctl"

// The job hash fields the driver reads: BullMQ 5 and 6 write the same.
const (
	fieldName         = "name"
	fieldData         = "data"
	fieldOpts         = "opts"
	fieldTimestamp    = "timestamp"
	fieldProcessedOn  = "processedOn"
	fieldFinishedOn   = "finishedOn"
	fieldFailedReason = "failedReason"
	fieldStacktrace   = "stacktrace"
	fieldAttemptsMade = "atm"
	// fieldAttemptsMadeOld is where BullMQ before 5 kept attemptsMade;
	// BullMQ 5 and 6 still read it, so the driver does too.
	fieldAttemptsMadeOld = "attemptsMade"
	fieldAttemptsStarted = "ats"
	fieldDelay           = "delay"
	fieldPriority        = "priority"
	fieldParentKey       = "parentKey"
)

// nativeFields are the hash fields a letter keeps in its Native, by
// BullMQ's names: what the job was and how it ran, less what has a place
// of its own (data is the payload; failedReason and stacktrace the
// errors; the attempt counts are Attempts).
var nativeFields = []string{fieldName, fieldOpts, fieldTimestamp, fieldProcessedOn, fieldFinishedOn, fieldDelay, fieldPriority, fieldParentKey}

// Native keys the driver adds beside the hash's own fields.
const (
	// NativeAttemptsStarted is BullMQ's attemptsStarted, by its name in
	// the Job API (the hash says ats).
	NativeAttemptsStarted = "attemptsStarted"
	// NativeVersion is the BullMQ version from the queue's meta.
	NativeVersion = "bullmq_version"
)

// incarnation is what tells this failure of a job from its next one: when
// it failed for good and after how many attempts. finishedOn alone is a
// worker's clock in milliseconds, which two failures on two hosts can
// share; the attempt count grows with every run.
func incarnation(finishedOn, attemptsMade string) string {
	return finishedOn + ":" + attemptsMade
}

// storedJob turns a failed job's hash into what capture stores. A hash
// without finishedOn is not a failed job (any more): ok is false.
func storedJob(r Ref, id string, h map[string]string, version string) (job deadletter.StoredJob, ok bool) {
	finishedOn := h[fieldFinishedOn]
	if finishedOn == "" {
		return deadletter.StoredJob{}, false
	}
	atm := attemptsMade(h)
	job = deadletter.StoredJob{
		System:      System,
		Queue:       r.Name(),
		ID:          id,
		Incarnation: incarnation(finishedOn, strconv.Itoa(atm)),
		Kind:        h[fieldName],
		// Byte for byte as stored: BullMQ writes JSON, but whatever else
		// is there is what the letter must hold; capture marks a payload
		// it cannot read as malformed.
		Payload:   []byte(h[fieldData]),
		Attempts:  atm,
		LastError: h[fieldFailedReason],
		Native:    make(map[string]string, len(nativeFields)+2),
	}
	if ms, err := strconv.ParseInt(finishedOn, 10, 64); err == nil {
		job.FailedAt = time.UnixMilli(ms).UTC()
	}
	var opts struct {
		Attempts int `json:"attempts"`
	}
	if json.Unmarshal([]byte(h[fieldOpts]), &opts) == nil && opts.Attempts > 0 {
		job.MaxAttempts = opts.Attempts
	}
	for _, f := range nativeFields {
		if v, ok := h[f]; ok {
			job.Native[f] = v
		}
	}
	if v, ok := h[fieldAttemptsStarted]; ok {
		job.Native[NativeAttemptsStarted] = v
	}
	if version != "" {
		job.Native[NativeVersion] = version
	}
	job.Errors = attemptErrors(h[fieldStacktrace], atm)
	job.Replay = marks(h[MarkField])
	return job, true
}

// attemptsMade is BullMQ's atm, or the older attemptsMade, as BullMQ 5's
// Job.fromJSON (and 6's Redis backend) reads it.
func attemptsMade(h map[string]string) int {
	for _, f := range []string{fieldAttemptsMade, fieldAttemptsMadeOld} {
		if n, err := strconv.Atoi(h[f]); err == nil && h[f] != "" {
			return n
		}
	}
	return 0
}

// attemptErrors reads BullMQ's stacktrace field, a JSON array with the
// stack of each failed attempt whose error had one, oldest first, cut to
// the job's stackTraceLimit from the front. BullMQ keeps no attempt
// numbers beside them, so the newest trace is numbered attemptsMade (the
// attempt whose failure ended the job pushed it last) and each older one
// a number less. That holds while every attempt left a trace; an attempt
// that failed with no stack (a thrown string), or ended by stalling, left
// none, and shifts the numbers of the traces before it. A trace numbered
// below 1 gets no number. Each trace's first line is its error: a stack
// begins "Name: message". No BullMQ time is kept per attempt either.
func attemptErrors(stacktrace string, attemptsMade int) []deadletter.JobError {
	if stacktrace == "" {
		return nil
	}
	var traces []any
	if json.Unmarshal([]byte(stacktrace), &traces) != nil {
		// Not BullMQ's shape: kept whole rather than lost.
		return []deadletter.JobError{{Attempt: max(attemptsMade, 0), Error: firstLine(stacktrace), Trace: stacktrace}}
	}
	out := make([]deadletter.JobError, 0, len(traces))
	for i, t := range traces {
		var trace string
		switch v := t.(type) {
		case string:
			trace = v
		case nil:
			continue
		default:
			b, _ := json.Marshal(v)
			trace = string(b)
		}
		e := deadletter.JobError{Error: firstLine(trace), Trace: trace}
		if n := attemptsMade - (len(traces) - 1 - i); n > 0 {
			e.Attempt = n
		}
		out = append(out, e)
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// marks reads what a replay wrote on the job (MarkField): a JSON object,
// its integers as int64 as the replay's headers have them. Anything else
// there is not expiryctl's and is left out.
func marks(s string) map[string]any {
	if s == "" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || len(m) == 0 {
		return nil
	}
	for k, v := range m {
		m[k] = numbers(v)
	}
	return m
}

// numbers turns json.Numbers into int64 where they are whole, float64
// otherwise, in v and what it holds.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// Marks reads the replay marks from a job's hash, as capture does: nil
// when no replay retried the job.
func Marks(hash map[string]string) map[string]any { return marks(hash[MarkField]) }
