package bullmq

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Counts are a BullMQ queue's jobs by state, as BullMQ's getJobCounts
// counts them: lists by length, sets by cardinality.
type Counts struct {
	// Exists is false when the queue has no meta hash: no BullMQ Queue
	// ever opened it.
	Exists          bool
	Waiting, Paused int
	Prioritized     int
	Active          int
	Delayed         int
	WaitingChildren int
	Failed          int
	Completed       int
}

// Counts reads the queue's live counts in one round trip, for a summary:
// waiting (BullMQ's own waiting count, wait and paused and prioritized,
// is Waiting+Paused+Prioritized), active, delayed, failed.
func (r Ref) Counts(ctx context.Context, client redis.UniversalClient) (Counts, error) {
	return counts(ctx, client, r)
}

func counts(ctx context.Context, client redis.UniversalClient, r Ref) (Counts, error) {
	k := keysOf(r)
	pipe := client.Pipeline()
	exists := pipe.Exists(ctx, k.of("meta"))
	wait, paused, active := pipe.LLen(ctx, k.of("wait")), pipe.LLen(ctx, k.of("paused")), pipe.LLen(ctx, k.of("active"))
	prioritized, delayed := pipe.ZCard(ctx, k.of("prioritized")), pipe.ZCard(ctx, k.of("delayed"))
	children, failed, completed := pipe.ZCard(ctx, k.of("waiting-children")), pipe.ZCard(ctx, k.of("failed")), pipe.ZCard(ctx, k.of("completed"))
	if _, err := pipe.Exec(ctx); err != nil {
		return Counts{}, fmt.Errorf("count the jobs of BullMQ queue %s: %w", r.Name(), err)
	}
	return Counts{Exists: exists.Val() == 1, Waiting: int(wait.Val()), Paused: int(paused.Val()), Active: int(active.Val()),
		Prioritized: int(prioritized.Val()), Delayed: int(delayed.Val()), WaitingChildren: int(children.Val()),
		Failed: int(failed.Val()), Completed: int(completed.Val())}, nil
}

// Worker is one connection a BullMQ Worker of the queue holds, from
// CLIENT LIST, as BullMQ's Queue.getWorkers finds it.
type Worker struct {
	// Name is the worker's name (its opts.name), empty when unnamed.
	Name string
	// Addr is where it connects from, and Age how long it has (seconds).
	Addr, Age string
}

// Workers lists the BullMQ workers connected to the queue: the Redis
// connections named PREFIX:base64(QUEUE) or PREFIX:base64(QUEUE):w:NAME,
// as every BullMQ Worker names its blocking connection (Queue.getWorkers
// reads the same). It is one CLIENT LIST: cheap, but a Redis that refuses
// CLIENT (some managed ones do) answers an error. A worker does not say
// its code's version, so this is who is there, not what they run.
func (r Ref) Workers(ctx context.Context, client redis.UniversalClient) ([]Worker, error) {
	list, err := client.ClientList(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("list the workers of BullMQ queue %s (CLIENT LIST): %w", r.Name(), err)
	}
	base := r.Prefix + ":" + base64.StdEncoding.EncodeToString([]byte(r.Queue))
	var out []Worker
	for line := range strings.Lines(list) {
		f := map[string]string{}
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		name := f["name"]
		switch {
		case name == base:
			out = append(out, Worker{Addr: f["addr"], Age: f["age"]})
		case strings.HasPrefix(name, base+":w:"):
			out = append(out, Worker{Name: strings.TrimPrefix(name, base+":w:"), Addr: f["addr"], Age: f["age"]})
		}
	}
	return out, nil
}
