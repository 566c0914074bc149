package deadletter

import (
	"encoding/json"
)

type queueStateFields QueueState

// MarshalJSON writes the state with HeadAge in seconds, as
// head_age_seconds (omitted when the broker did not say), not as
// time.Duration's nanoseconds.
func (q QueueState) MarshalJSON() ([]byte, error) {
	var age *Seconds
	if q.HeadAge != nil {
		s := Seconds(*q.HeadAge)
		age = &s
	}
	return json.Marshal(struct {
		queueStateFields
		HeadAge *Seconds `json:"head_age_seconds,omitempty"`
	}{queueStateFields(q), age})
}
