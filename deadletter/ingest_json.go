package deadletter

import "encoding/json"

type ingestStatsFields IngestStats

// MarshalJSON writes the stats with Elapsed in seconds, as elapsed_seconds,
// not as time.Duration's nanoseconds.
func (s IngestStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ingestStatsFields
		Elapsed Seconds `json:"elapsed_seconds"`
	}{ingestStatsFields(s), Seconds(s.Elapsed)})
}
