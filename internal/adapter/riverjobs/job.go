package riverjobs

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

// MarksKey is the key of river_job.metadata under which a replay writes
// its marks (the x-replay-* headers of replay.Message), and where capture
// reads them back when the job dies again.
const MarksKey = "expiryctl"

// jobColumns are the river_job columns capture reads, in jobRow's order:
// all of them are River's since its migration 005 (River 0.10.0), which
// added unique_key.
//
// args and metadata are jsonb: PostgreSQL keeps no copy of the bytes River
// sent, only its own binary form, so "byte for byte" can only mean the
// text PostgreSQL gives back for it (what args::text shows: keys sorted,
// one space after each colon and comma). River marshals args with
// encoding/json before the insert; a payload read here equals that
// marshalled form up to jsonb's normalisation, and equals args::text
// exactly.
const jobColumns = `id, kind, args, attempt, max_attempts, coalesce(array_to_json(errors)::text, '[]'),
	finalized_at, queue, state::text, priority, created_at, scheduled_at, attempted_at,
	coalesce(tags, '{}'), metadata, coalesce(attempted_by, '{}'), unique_key`

// jobRow is one river_job row as jobColumns reads it.
type jobRow struct {
	id                   int64
	kind                 string
	args                 []byte
	attempt, maxAttempts int
	errors               []byte
	finalizedAt          time.Time
	queue, state         string
	priority             int
	createdAt, scheduled time.Time
	attemptedAt          *time.Time
	tags, attemptedBy    []string
	metadata, uniqueKey  []byte
}

func scanJob(row pgx.Row) (jobRow, error) {
	var j jobRow
	err := row.Scan(&j.id, &j.kind, &j.args, &j.attempt, &j.maxAttempts, &j.errors,
		&j.finalizedAt, &j.queue, &j.state, &j.priority, &j.createdAt, &j.scheduled, &j.attemptedAt,
		&j.tags, &j.metadata, &j.attemptedBy, &j.uniqueKey)
	j.finalizedAt = j.finalizedAt.UTC()
	return j, err
}

// jobKey is a job's place in capture's order. Since an incarnation is
// finalized_at, it is also a failure's identity.
type jobKey = pgjobs.Key[int64]

// key is the row's place in capture's order.
func (j jobRow) key() jobKey { return jobKey{At: j.finalizedAt, ID: j.id} }

// Incarnation is how a letter names one failure of a job: its finalized_at
// to the microsecond PostgreSQL keeps, in UTC. A retry clears finalized_at
// and the next failure sets a new one, so the same id with another
// incarnation is another letter.
func Incarnation(finalizedAt time.Time) string {
	return finalizedAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// stored is the row as the job the letter contract describes. Nothing in
// a row is reason enough to drop it: what does not decode stays in Native
// as it came, and args go as they are for capture to classify.
func (j jobRow) stored(queue string) deadletter.StoredJob {
	s := deadletter.StoredJob{
		System:      System,
		Queue:       queue,
		ID:          strconv.FormatInt(j.id, 10),
		Incarnation: Incarnation(j.finalizedAt),
		Kind:        j.kind,
		Payload:     j.args,
		FailedAt:    j.finalizedAt,
		Attempts:    j.attempt,
		MaxAttempts: j.maxAttempts,
		Errors:      attemptErrors(j.errors),
		Replay:      marks(j.metadata),
		Native: map[string]string{
			"queue":        j.queue,
			"state":        j.state,
			"priority":     strconv.Itoa(j.priority),
			"created_at":   j.createdAt.UTC().Format(time.RFC3339Nano),
			"scheduled_at": j.scheduled.UTC().Format(time.RFC3339Nano),
			"tags":         jsonText(j.tags),
			"metadata":     string(j.metadata),
			"attempted_by": jsonText(j.attemptedBy),
		},
	}
	if j.attemptedAt != nil {
		s.Native["attempted_at"] = j.attemptedAt.UTC().Format(time.RFC3339Nano)
	}
	if j.uniqueKey != nil {
		s.Native["unique_key"] = hex.EncodeToString(j.uniqueKey)
	}
	return s
}

// attemptError is an element of river_job.errors (rivertype.AttemptError).
type attemptError struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Error   string    `json:"error"`
	Trace   string    `json:"trace"`
}

// attemptErrors reads River's error history element by element: one that
// does not decode as River writes them keeps its raw JSON as its error
// text rather than vanishing from the history.
func attemptErrors(raw []byte) []deadletter.JobError {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return []deadletter.JobError{{Error: string(raw)}}
	}
	out := make([]deadletter.JobError, 0, len(elems))
	for _, e := range elems {
		var a attemptError
		if json.Unmarshal(e, &a) != nil {
			out = append(out, deadletter.JobError{Error: string(e)})
			continue
		}
		out = append(out, deadletter.JobError{Attempt: a.Attempt, At: a.At.UTC(), Error: a.Error, Trace: a.Trace})
	}
	return out
}

// marks is the object a replay wrote under MarksKey in metadata, nil when
// none did (pgjobs.Marks).
func marks(metadata []byte) map[string]any {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return nil
	}
	return pgjobs.Marks(m[MarksKey])
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
