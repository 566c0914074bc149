package bullmq_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/replay"
)

// benchJobs is how many failed jobs each benchmark iteration reads or
// retries: enough for pages and pipelines to matter, few enough for a
// laptop's Redis.
const benchJobs = 1000

func seedBench(b *testing.B, q bullmqtest.Queue) {
	b.Helper()
	jobs := make([]failedJob, benchJobs)
	for i := range jobs {
		jobs[i] = failedJob{ID: strconv.Itoa(i + 1), FinishedOn: int64(1_700_000_000_000 + i)}
	}
	seed(b, q, bullmq.TestedVersion, jobs...)
}

// BenchmarkSourceRead compares the source's read of benchJobs failed
// jobs, each made into a message and acknowledged, with the bare reads
// under it: ZRANGE BYSCORE pages of 500 and a pipeline of HGETALLs each.
// source/bare is what the driver's bookkeeping and the Message cost.
func BenchmarkSourceRead(b *testing.B) {
	q := bullmqtest.NewQueue(b)
	seedBench(b, q)
	ctx := context.Background()
	var source, bare time.Duration
	for b.Loop() {
		start := time.Now()
		src, err := bullmq.OpenSource(ctx, q.Client, q.Ref, bullmq.SourceOptions{Poll: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for range benchJobs {
			d := <-src.Deliveries()
			_ = src.Acknowledge(d.Tag)
		}
		_ = src.Close()
		source += time.Since(start)

		start = time.Now()
		n, lower := 0, "-inf"
		for n < benchJobs {
			zs := q.Client.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: q.Key("failed"), ByScore: true, Start: lower, Stop: "+inf", Offset: int64(min(n, 1)), Count: 500}).Val()
			pipe := q.Client.Pipeline()
			for _, z := range zs {
				pipe.HGetAll(ctx, q.Key(z.Member.(string)))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			n += len(zs)
			lower = strconv.FormatFloat(zs[len(zs)-1].Score, 'f', 0, 64)
		}
		bare += time.Since(start)
	}
	b.ReportMetric(float64(source.Nanoseconds())/float64(b.N*benchJobs), "source-ns/job")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N*benchJobs), "bare-ns/job")
	b.ReportMetric(float64(source)/float64(bare), "source/bare")
}

// BenchmarkRetrier compares the retrier's retry of benchJobs captured
// jobs (Publish, 64 in flight, and the outcome of each) with the same
// script run bare by EVALSHA from 64 goroutines: what the Pending, the
// marks' JSON and the reference parsing cost.
func BenchmarkRetrier(b *testing.B) {
	lua, err := os.ReadFile("retry.lua")
	if err != nil {
		b.Fatal(err)
	}
	script := redis.NewScript(string(lua))
	q := bullmqtest.NewQueue(b)
	r := newRetrier(b, q)
	ctx := context.Background()
	keys := func(id string) []string {
		return []string{q.Key(id), q.Key("events"), q.Key("failed"), q.Key("wait"), q.Key("meta"), q.Key("paused"), q.Key("active"),
			q.Key("marker"), q.Key("prioritized"), q.Key("pc"), q.Key("completed"), q.Key("delayed"), q.Key("waiting-children")}
	}
	reset := func() {
		b.StopTimer()
		q.Client.Del(ctx, q.Key("wait"), q.Key("events"), q.Key("marker"))
		seedBench(b, q)
		b.StartTimer()
	}
	var retrier, bare time.Duration
	for b.Loop() {
		reset()
		start := time.Now()
		pending := make([]replay.Pending, benchJobs)
		for i := range benchJobs {
			id := strconv.Itoa(i + 1)
			m := replay.Message{System: bullmq.System, RoutingKey: q.Ref.Name(), Item: int64(i + 1),
				Headers: map[string]any{replay.HeaderReplayRequest: int64(1), replay.HeaderReplayItem: int64(i + 1)},
				Job:     replay.JobRef{ID: id, Incarnation: strconv.Itoa(1_700_000_000_000+i) + ":2"}}
			if pending[i], err = r.Publish(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range pending {
			<-p.Done()
			if err := p.Outcome(); err != nil {
				b.Fatal(err)
			}
		}
		retrier += time.Since(start)

		reset()
		start = time.Now()
		work := make(chan int)
		done := make(chan error, 64)
		for range 64 {
			go func() {
				for i := range work {
					marks, _ := json.Marshal(map[string]any{replay.HeaderReplayRequest: 1, replay.HeaderReplayItem: i + 1})
					err := script.Run(ctx, q.Client, keys(strconv.Itoa(i+1)), strconv.Itoa(i+1), strconv.Itoa(1_700_000_000_000+i), "2",
						marks, "1", strconv.Itoa(i+1), bullmq.MarkField, "bullmq:5.", "bullmq:6.").Err()
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for i := range benchJobs {
			work <- i
		}
		close(work)
		for range 64 {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		bare += time.Since(start)
	}
	b.ReportMetric(float64(retrier.Nanoseconds())/float64(b.N*benchJobs), "retrier-ns/job")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N*benchJobs), "bare-ns/job")
	b.ReportMetric(float64(retrier)/float64(bare), "retrier/bare")
}
