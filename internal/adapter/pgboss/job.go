package pgboss

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// TestedVersion is the pg-boss release whose schema and retry this
// driver's tests run against, with a real pg-boss producer and worker
// (e2e/node/package.json pins it).
const TestedVersion = "12.38.1"

// MarksKey is the key of job.trace_context under which a replay writes
// its marks (the x-replay-* headers of replay.Message), and where capture
// reads them back when the job fails again.
//
// pg-boss has no column of free metadata, as River's metadata is, and a
// failure rewrites output. trace_context (pg-boss 12.36.0) is the one
// column of its own that pg-boss carries, unread, through every failure,
// retry and dead-letter copy of a job: it is the text-map carrier of the
// job's OpenTelemetry context, and a propagator reads the keys it knows
// (traceparent, tracestate, baggage) and no other, so a key of
// expiryctl's there changes nothing a worker sees. Writing the marks into
// data would hand them to the worker's handler as part of its job.
const MarksKey = "expiryctl"

// jobColumns are the job columns capture reads, named as jobRow's db tags
// name them; pgx reads them by name. All of them are pg-boss's since its
// schema version 44 (pg-boss 12.36.0), which added trace_context.
//
// data and output are jsonb: PostgreSQL keeps no copy of the bytes pg-boss
// sent, only its own binary form, so a payload read here is data::text
// (keys sorted, one space after each colon and comma), which is what
// pg-boss's JSON.stringify of the job's data becomes in jsonb. A job sent
// with no data has SQL NULL there, which a worker reads as null: the
// payload is then the JSON null.
const jobColumns = `id::text AS id, name, coalesce(data::text, 'null') AS data, state::text AS state,
	priority, retry_count, retry_limit, retry_delay, retry_backoff,
	start_after, created_on, started_on, completed_on, keep_until,
	output::text AS output, singleton_key, policy, dead_letter, trace_context -> '` + MarksKey + `' AS marks`

// jobRow is one job row as jobColumns reads it.
type jobRow struct {
	ID           string     `db:"id"`
	Name         string     `db:"name"`
	Data         []byte     `db:"data"`
	State        string     `db:"state"`
	Priority     int        `db:"priority"`
	RetryCount   int        `db:"retry_count"`
	RetryLimit   int        `db:"retry_limit"`
	RetryDelay   int        `db:"retry_delay"`
	RetryBackoff bool       `db:"retry_backoff"`
	StartAfter   time.Time  `db:"start_after"`
	CreatedOn    time.Time  `db:"created_on"`
	StartedOn    *time.Time `db:"started_on"`
	CompletedOn  time.Time  `db:"completed_on"`
	KeepUntil    time.Time  `db:"keep_until"`
	Output       *string    `db:"output"`
	SingletonKey *string    `db:"singleton_key"`
	Policy       *string    `db:"policy"`
	DeadLetter   *string    `db:"dead_letter"`
	Marks        []byte     `db:"marks"`
}

// key is the row's place in capture's order.
func (j jobRow) key() jobKey { return jobKey{At: j.CompletedOn.UTC(), ID: j.ID} }

// Incarnation is how a letter names one failure of a job: its completed_on
// to the microsecond PostgreSQL keeps, in UTC. pg-boss sets completed_on
// when it gives up on the job; a retry clears it and the next failure sets
// a new one, so the same id with another incarnation is another letter.
func Incarnation(completedOn time.Time) string {
	return completedOn.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// Attempts is how many times pg-boss handed the job to a worker: each
// fetch after the first adds one to retry_count, and started_on says
// whether there was a first (a job failed by fail() before any worker
// fetched it never ran).
func attempts(retryCount int, startedOn *time.Time) int {
	if startedOn == nil {
		return 0
	}
	return retryCount + 1
}

// stored is the row as the job the letter contract describes. Nothing in
// a row is reason enough to drop it: what does not decode stays in Native
// as it came, and data goes as it is for capture to classify.
//
// pg-boss keeps the last failure only: output is overwritten by each
// attempt that fails, so the history is that one attempt.
func (j jobRow) stored(queue string) deadletter.StoredJob {
	n := attempts(j.RetryCount, j.StartedOn)
	last := jobError(j.Output)
	last.Attempt = n
	last.At = j.CompletedOn.UTC()
	s := deadletter.StoredJob{
		System:      System,
		Queue:       queue,
		ID:          j.ID,
		Incarnation: Incarnation(j.CompletedOn),
		// A pg-boss job's kind is its queue: job.name is the queue's name.
		Kind:        j.Name,
		Payload:     j.Data,
		FailedAt:    j.CompletedOn.UTC(),
		Attempts:    n,
		MaxAttempts: j.RetryLimit + 1,
		Replay:      pgjobs.Marks(j.Marks),
		Native: map[string]string{
			"name":          j.Name,
			"state":         j.State,
			"priority":      strconv.Itoa(j.Priority),
			"retry_count":   strconv.Itoa(j.RetryCount),
			"retry_limit":   strconv.Itoa(j.RetryLimit),
			"retry_delay":   strconv.Itoa(j.RetryDelay),
			"retry_backoff": strconv.FormatBool(j.RetryBackoff),
			"start_after":   j.StartAfter.UTC().Format(time.RFC3339Nano),
			"created_on":    j.CreatedOn.UTC().Format(time.RFC3339Nano),
			"completed_on":  j.CompletedOn.UTC().Format(time.RFC3339Nano),
			"keep_until":    j.KeepUntil.UTC().Format(time.RFC3339Nano),
		},
	}
	if last.Error != "" {
		s.Errors = []deadletter.JobError{last}
	}
	for k, v := range map[string]*string{"output": j.Output, "singleton_key": j.SingletonKey, "policy": j.Policy, "dead_letter": j.DeadLetter} {
		if v != nil {
			s.Native[k] = *v
		}
	}
	if j.StartedOn != nil {
		s.Native["started_on"] = j.StartedOn.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// jobError reads pg-boss's output of a failed job as the error and trace
// it holds. pg-boss writes an Error its worker threw as serialize-error
// makes it ({"name", "message", "stack", …}), anything else thrown as
// {"value": …}, and a job that outlived its expiration as
// {"value": {"message": "job timed out"}}. An output that is none of
// these is the error's text as it came.
func jobError(output *string) deadletter.JobError {
	if output == nil || *output == "" || *output == "null" {
		return deadletter.JobError{}
	}
	var out struct {
		Message json.RawMessage `json:"message"`
		Stack   json.RawMessage `json:"stack"`
		Value   json.RawMessage `json:"value"`
	}
	if json.Unmarshal([]byte(*output), &out) != nil {
		return deadletter.JobError{Error: *output}
	}
	text := func(raw json.RawMessage) (string, bool) {
		var s string
		return s, len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s != ""
	}
	stack, _ := text(out.Stack)
	if msg, ok := text(out.Message); ok {
		return deadletter.JobError{Error: msg, Trace: stack}
	}
	if v, ok := text(out.Value); ok {
		return deadletter.JobError{Error: v}
	}
	if len(out.Value) > 0 {
		inner := string(out.Value)
		if e := jobError(&inner); e.Error != "" {
			return e
		}
	}
	return deadletter.JobError{Error: *output, Trace: stack}
}
