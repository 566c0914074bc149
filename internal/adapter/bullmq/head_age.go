package bullmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// headAges reads how long the oldest job has waited in each of the states
// `dlq summary` shows an age for, by Redis's clock: ready, the job a
// worker takes next (the tail of the wait list, else the first
// prioritized), since it became due (its timestamp plus its delay); failed,
// the oldest of the failed set, since it failed (its score, finishedOn).
// Either is nil when nothing is there.
func headAges(ctx context.Context, client redis.UniversalClient, r Ref) (ready, failed *time.Duration, err error) {
	k := keysOf(r)
	pipe := client.Pipeline()
	now := pipe.Time(ctx)
	waitTail := pipe.LIndex(ctx, k.of("wait"), -1)
	firstPrioritized := pipe.ZRange(ctx, k.of("prioritized"), 0, 0)
	oldestFailed := pipe.ZRangeWithScores(ctx, k.of("failed"), 0, 0)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read the oldest jobs of BullMQ queue %s: %w", r.Name(), err)
	}
	at := now.Val()
	if z := oldestFailed.Val(); len(z) == 1 {
		failed = since(at, int64(z[0].Score))
	}
	id := waitTail.Val()
	if p := firstPrioritized.Val(); id == "" && len(p) == 1 {
		id = p[0]
	}
	if id == "" {
		return nil, failed, nil
	}
	fields, err := client.HMGet(ctx, k.of(id), "timestamp", "delay").Result()
	if err != nil {
		return nil, nil, fmt.Errorf("read job %s of BullMQ queue %s: %w", id, r.Name(), err)
	}
	added, ok := millis(fields[0])
	if !ok {
		// The job went on meanwhile: nothing to say of its wait.
		return nil, failed, nil
	}
	delay, _ := millis(fields[1])
	return since(at, added+delay), failed, nil
}

// since is the time from ms, milliseconds since the epoch, to now, never
// below zero.
func since(now time.Time, ms int64) *time.Duration {
	d := max(now.Sub(time.UnixMilli(ms)), 0)
	return &d
}

// millis reads a job hash's field of milliseconds.
func millis(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
