package bullmq_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// failWithBullMQ has a real BullMQ Worker fail one job per payload for
// good (attempts: 1) and returns their ids in order. BullMQ stores data
// as JSON.stringify wrote it; a payload it would write otherwise (not
// JSON, or spelled differently) is then written into the failed job's
// data as it is, so the test can ask for it byte for byte.
func failWithBullMQ(t *testing.T, q bullmqtest.Queue, w *bullmqtest.Worker, payloads [][]byte) []string {
	t.Helper()
	jobs := make([]map[string]any, len(payloads))
	for i, p := range payloads {
		var data any = map[string]any{"placeholder": i}
		if json.Valid(p) {
			data = json.RawMessage(p)
		}
		jobs[i] = map[string]any{"name": "expire", "data": data, "opts": map[string]any{"attempts": 1}}
	}
	before := q.Client.ZCard(t.Context(), q.Key("failed")).Val()
	ids := w.Add(jobs...)
	q.WaitFailed(t, int(before)+len(ids))
	for i, id := range ids {
		if q.Client.HGet(t.Context(), q.Key(id), "data").Val() != string(payloads[i]) {
			q.Client.HSet(t.Context(), q.Key(id), "data", payloads[i])
		}
	}
	return ids
}

// failAgainWithBullMQ has BullMQ's own Job.retry() put the job back and
// the failing worker fail it once more.
func failAgainWithBullMQ(t *testing.T, q bullmqtest.Queue, w *bullmqtest.Worker, id string) {
	t.Helper()
	atm, _ := strconv.Atoi(q.Hash(t, id)["atm"])
	w.Retry(id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := q.Hash(t, id)
		n, _ := strconv.Atoi(h["atm"])
		if n > atm && h["finishedOn"] != "" && q.Client.ZScore(t.Context(), q.Key("failed"), id).Err() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not fail again: %v", id, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
