package deadletter

import "time"

// maxRedeadRequests bounds the requests the summary counts re-dead
// letters for: the latest ones, which an incident is about.
const maxRedeadRequests = 20

// RequestRedead counts the letters that died again after one replay
// request put their jobs back on the queue: `dlq summary` shows them per
// request, `dlq list --request N` lists them.
type RequestRedead struct {
	RequestID int64 `json:"request_id"`
	// Letters are all of them; Waiting those still dead or in a request.
	Letters int64 `json:"letters"`
	Waiting int64 `json:"waiting"`
	// LastDeadLetteredAt is when the latest of them died.
	LastDeadLetteredAt time.Time `json:"last_dead_lettered_at"`
}
