package bullmq_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
)

// failedJob is a job seeded in the failed set as BullMQ 5's
// moveToFinished leaves it; its zero fields get plausible values.
type failedJob struct {
	ID       string
	Name     string
	Data     []byte
	Opts     string
	Attempts int // atm
	Reason   string
	Traces   []string
	// FinishedOn is the failed set's score, in milliseconds.
	FinishedOn int64
	Priority   int
	Extra      map[string]string
}

// seed writes the queue's meta (version, as BullMQ's Queue does) and jobs
// into the failed set. TestSeedIsBullMQsShape holds the hash it writes to
// a real BullMQ Worker's.
func seed(tb testing.TB, q bullmqtest.Queue, version string, jobs ...failedJob) {
	tb.Helper()
	ctx := context.Background()
	pipe := q.Client.Pipeline()
	if version != "" {
		pipe.HSet(ctx, q.Key("meta"), "opts.maxLenEvents", "10000", "version", version)
	}
	for i, j := range jobs {
		if j.ID == "" {
			j.ID = strconv.Itoa(i + 1)
		}
		if j.Name == "" {
			j.Name = "expire"
		}
		if j.Data == nil {
			j.Data = []byte(`{"reservation_id":"r-` + j.ID + `"}`)
		}
		if j.Opts == "" {
			j.Opts = `{"attempts":2}`
		}
		if j.Attempts == 0 {
			j.Attempts = 2
		}
		if j.Reason == "" {
			j.Reason = "db_timeout: reservation r-" + j.ID + " lock wait exceeded"
		}
		if j.Traces == nil {
			for range j.Attempts {
				j.Traces = append(j.Traces, "Error: "+j.Reason+"\n    at Worker [as processFn] (worker.js:1:1)")
			}
		}
		if j.FinishedOn == 0 {
			j.FinishedOn = time.Now().UnixMilli()
		}
		traces, _ := json.Marshal(j.Traces)
		fields := map[string]any{"name": j.Name, "data": j.Data, "opts": j.Opts, "timestamp": j.FinishedOn - 50,
			"delay": "0", "priority": strconv.Itoa(j.Priority), "processedOn": j.FinishedOn - 5, "finishedOn": j.FinishedOn,
			"atm": j.Attempts, "ats": j.Attempts, "failedReason": j.Reason, "stacktrace": traces}
		for k, v := range j.Extra {
			fields[k] = v
		}
		pipe.HSet(ctx, q.Key(j.ID), fields)
		pipe.ZAdd(ctx, q.Key("failed"), redis.Z{Score: float64(j.FinishedOn), Member: j.ID})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		tb.Fatal(err)
	}
}
