package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/replay"
)

// bullmqRetriers is how many retry scripts bullmq.Retrier has in flight
// (its maxRetrying): one EVALSHA each.
const bullmqRetriers = 64

// bullmqPage is the source's default page: one ZRANGE and a pipeline of as
// many HGETALLs.
const bullmqPage = 500

// bullmqBareMove is the baseline of a BullMQ retry: the writes retry.lua
// makes for a failed job of a queue neither paused nor prioritized, in
// one script as it makes them, without any of its checks (the meta's
// version, the job's existence, the replay's marks, the incarnation, the
// queue's state, the job's priority and options, a flow's parent), so
// that the ratio is what those checks cost in Redis and what the retrier
// costs beside them.
//
// KEYS: the job hash, failed, wait, marker, events. ARGV: the job id, the
// marks, the mark field.
var bullmqBareMove = redis.NewScript(`
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("HDEL", KEYS[1], "finishedOn", "processedOn", "failedReason")
redis.call("HSET", KEYS[1], ARGV[3], ARGV[2])
redis.call("LPUSH", KEYS[3], ARGV[1])
redis.call("ZADD", KEYS[4], 0, "0")
redis.call("XADD", KEYS[5], "MAXLEN", "~", 10000, "*", "event", "waiting", "jobId", ARGV[1], "prev", "failed")
return 1`)

// openBullMQStore fails n jobs in queue expiry under a prefix of the
// scenario's own on the benchmark's Redis, as BullMQ 5's moveToFinished
// leaves them (the meta's version, each job's hash, the failed set), with
// the contract's data and a two-attempt history.
func openBullMQStore(ctx context.Context, cfg *config, n int) (*jobStore, error) {
	ref, err := bullmq.ParseRef("bullmq://" + cfg.RedisAddr + "/0/expiry?prefix=expiryctl-bench-" + runID + "-" + randomSuffix()[:6])
	if err != nil {
		return nil, err
	}
	client := bullmq.Dial(ref)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("no Redis answers at %s (%w): start it with scripts/services.sh or set -redis-addr", cfg.RedisAddr, err)
	}
	key := func(name string) string { return ref.Prefix + ":" + ref.Queue + ":" + name }
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		iter := client.Scan(ctx, 0, ref.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			cfg.logf("warning: remove the keys under Redis prefix %s: %v", ref.Prefix, err)
		}
		_ = client.Close()
	}
	// fail writes every job afresh, as a failure with the same finishedOn:
	// the hash is deleted first, so that no mark of an earlier retry stays.
	fail := func(ctx context.Context) error {
		if err := client.Del(ctx, key("wait"), key("events"), key("marker")).Err(); err != nil {
			return err
		}
		if err := client.HSet(ctx, key("meta"), "opts.maxLenEvents", "10000", "version", bullmq.TestedVersion).Err(); err != nil {
			return err
		}
		for lo := 0; lo < n; lo += 1000 {
			pipe := client.Pipeline()
			for i := lo; i < min(lo+1000, n); i++ {
				id := strconv.Itoa(i + 1)
				finished := int64(1_700_000_000_000 + i)
				reason := "db_timeout: reservation r-" + id + " lock wait exceeded"
				traces, _ := json.Marshal([]string{"Error: " + reason + "\n    at Worker [as processFn] (worker.js:1:1)",
					"Error: " + reason + "\n    at Worker [as processFn] (worker.js:1:1)"})
				pipe.Del(ctx, key(id))
				pipe.HSet(ctx, key(id), map[string]any{"name": "expire",
					"data": `{"reservation_id":"r-` + id + `","idempotency_key":"expire:r-` + id + `:v1","expected_version":3}`,
					"opts": `{"attempts":2}`, "timestamp": finished - 50, "delay": "0", "priority": "0",
					"processedOn": finished - 5, "finishedOn": finished, "atm": 2, "ats": 2, "failedReason": reason, "stacktrace": traces})
				pipe.ZAdd(ctx, key("failed"), redis.Z{Score: float64(finished), Member: id})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	if err := fail(ctx); err != nil {
		cleanup()
		return nil, fmt.Errorf("fail %d BullMQ jobs: %w", n, err)
	}
	return &jobStore{
		system: bullmq.System, queue: ref.Name(),
		openSource: func(ctx context.Context, prefetch int) (deadletter.ClosableSource, error) {
			return bullmq.OpenDialed(ctx, ref, bullmq.SourceOptions{Prefetch: prefetch})
		},
		openBareRead: func(context.Context) (bareRead, func(), error) {
			c := bullmq.Dial(ref)
			return func(ctx context.Context, n int) error { return bullmqBareRead(ctx, c, key, n) }, func() { _ = c.Close() }, nil
		},
		bareReadName: "ZRANGE + pipelined HGETALL",
		fail:         fail,
		retried: func(ctx context.Context) (int, error) {
			got, err := client.LLen(ctx, key("wait")).Result()
			return int(got), err
		},
		openRetrier: func(context.Context) (replay.Broker, error) {
			return bullmq.NewRetrier(func(name string) (bullmq.Ref, error) {
				if name != ref.Name() {
					return bullmq.Ref{}, fmt.Errorf("the bench retries %s, not %s", ref.Name(), name)
				}
				return ref, nil
			}), nil
		},
		bareRetry: func(ctx context.Context, jobs []replay.JobRef) error {
			return concurrently(ctx, jobs, bullmqRetriers, func(ctx context.Context, job replay.JobRef) error {
				marks := `{"x-replay-request":1,"x-replay-item":` + job.ID + `}`
				return bullmqBareMove.Run(ctx, client, []string{key(job.ID), key("failed"), key("wait"), key("marker"), key("events")},
					job.ID, marks, bullmq.MarkField).Err()
			})
		},
		bareRetryName:      "EVALSHA of the move alone",
		retrierConcurrency: bullmqRetriers,
		close:              cleanup,
	}, nil
}

// bullmqBareRead is the BullMQ baseline: the reads the source makes and
// nothing else, on a client of the phase's own as the source dials its
// own: pages of bullmqPage failed job ids from the failed set (ZRANGE, by
// rank where the source reads by score), each page's hashes in one
// pipeline of HGETALLs.
func bullmqBareRead(ctx context.Context, client *redis.Client, key func(string) string, n int) error {
	got := 0
	for {
		ids, err := client.ZRange(ctx, key("failed"), int64(got), int64(got+bullmqPage-1)).Result()
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			break
		}
		pipe := client.Pipeline()
		for _, id := range ids {
			pipe.HGetAll(ctx, key(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		got += len(ids)
	}
	if got != n {
		return fmt.Errorf("read %d jobs, want %d", got, n)
	}
	return nil
}
