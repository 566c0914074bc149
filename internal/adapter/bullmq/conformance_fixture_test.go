package bullmq_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"
)

// failWithBullMQ has a real BullMQ Worker fail one job per payload for
// good (attempts: 1) and returns their ids in order. BullMQ stores data
// as JSON.stringify wrote it; a payload it would write otherwise (not
// JSON, or spelled differently) is then written into the failed job's
// data as it is, so the test can ask for it byte for byte.
func failWithBullMQ(t *testing.T, q testQueue, w *nodeWorker, payloads [][]byte) []string {
	t.Helper()
	jobs := make([]map[string]any, len(payloads))
	for i, p := range payloads {
		var data any = map[string]any{"placeholder": i}
		if json.Valid(p) {
			data = json.RawMessage(p)
		}
		jobs[i] = map[string]any{"name": "expire", "data": data, "opts": map[string]any{"attempts": 1}}
	}
	before := q.client.ZCard(t.Context(), q.key("failed")).Val()
	ids := w.add(jobs...)
	waitFailed(t, q, int(before)+len(ids))
	for i, id := range ids {
		if q.client.HGet(t.Context(), q.key(id), "data").Val() != string(payloads[i]) {
			q.client.HSet(t.Context(), q.key(id), "data", payloads[i])
		}
	}
	return ids
}

// failAgainWithBullMQ has BullMQ's own Job.retry() put the job back and
// the failing worker fail it once more.
func failAgainWithBullMQ(t *testing.T, q testQueue, w *nodeWorker, id string) {
	t.Helper()
	atm, _ := strconv.Atoi(q.hash(t, id)["atm"])
	w.send(map[string]any{"cmd": "retry", "id": id})
	w.await("retried", id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := q.hash(t, id)
		n, _ := strconv.Atoi(h["atm"])
		if n > atm && h["finishedOn"] != "" && q.client.ZScore(t.Context(), q.key("failed"), id).Err() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not fail again: %v", id, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// state is where a job is, in BullMQ's words (Job.getState).
func (q testQueue) state(t *testing.T, id string) string {
	t.Helper()
	ctx := t.Context()
	for _, z := range []struct{ key, state string }{{"completed", "completed"}, {"failed", "failed"}, {"delayed", "delayed"},
		{"prioritized", "prioritized"}, {"waiting-children", "waiting-children"}} {
		if q.client.ZScore(ctx, q.key(z.key), id).Err() == nil {
			return z.state
		}
	}
	for _, l := range []struct{ key, state string }{{"active", "active"}, {"wait", "waiting"}, {"paused", "waiting"}} {
		if slices.Contains(q.client.LRange(ctx, q.key(l.key), 0, -1).Val(), id) {
			return l.state
		}
	}
	if q.client.Exists(ctx, q.key(id)).Val() == 0 {
		return "deleted"
	}
	return "unknown"
}
