package bullmq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/fixture/bullmqtest"
	"github.com/expiryctl/expiryctl/replay"
)

// openedQueue writes the meta hash a BullMQ Queue writes when it opens
// queue under prefix.
func openedQueue(t *testing.T, q bullmqtest.Queue, prefix, queue string) {
	t.Helper()
	if err := q.Client.HSet(t.Context(), prefix+":"+queue+":meta", "opts.maxLenEvents", "10000", "version", bullmq.TestedVersion).Err(); err != nil {
		t.Fatal(err)
	}
}

// notFoundEverywhere is what capture, the summary (Topology) and a
// replay each say of ref's queue: their errors, or the report's
// Unavailable.
func notFoundEverywhere(t *testing.T, q bullmqtest.Queue, ref bullmq.Ref) (capture error, topology string, retry error) {
	t.Helper()
	_, capture = bullmq.OpenSource(t.Context(), q.Client, ref, bullmq.SourceOptions{})
	report, err := bullmq.Topology(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	r := bullmq.NewRetrier(bullmqtest.Resolve(q.Ref))
	t.Cleanup(func() { _ = r.Close() })
	retry = publish(t, r, replay.Message{System: bullmq.System, RoutingKey: ref.Name(), Item: 1,
		Headers: map[string]any{replay.HeaderReplayRequest: int64(7), replay.HeaderReplayItem: int64(1)},
		Job:     replay.JobRef{ID: "1", Incarnation: "1700000000000:2"}})
	return capture, report.Unavailable, retry
}

// TestQueueNotFoundNamesThePrefixes: a queue that has no meta hash under
// the prefix it is named with is said not to exist, by capture, the
// summary and a replay alike, with the prefixes under which the same
// Redis database holds a queue of its name and the name to give it; or,
// when none does, the queues it holds (a typo?), or that it holds none.
// Each case has a Redis of its own, so that what the SCAN finds is known.
func TestQueueNotFoundNamesThePrefixes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, q bullmqtest.Queue)
		// queue and prefix name the queue asked for; want is the whole
		// message, with %[1]s for its name and %[2]s for the
		// connection's.
		queue, prefix, want string
	}{
		{name: "another prefix",
			setup: func(t *testing.T, q bullmqtest.Queue) {
				seed(t, q, bullmq.TestedVersion, failedJob{ID: "1"})
				openedQueue(t, q, "other", "orders")
			},
			queue: "", prefix: "bull",
			want: `BullMQ queue %[1]s does not exist: no Queue opened it under prefix "bull"; Redis holds a queue %[3]q under prefix %[4]q: ` +
				`name it bullmq://%[2]s/%[4]s/%[3]s (or ?prefix=%[4]s in a URL)`},
		{name: "two other prefixes",
			setup: func(t *testing.T, q bullmqtest.Queue) {
				openedQueue(t, q, "{myapp}", "expiry")
				openedQueue(t, q, "app:v2", "expiry")
				openedQueue(t, q, "bull", "expiry-dlq")
			},
			queue: "expiry", prefix: "bull",
			want: `BullMQ queue %[1]s does not exist: no Queue opened it under prefix "bull"; Redis holds a queue "expiry" under prefixes "app:v2", "{myapp}": ` +
				`name it with one of them, e.g. bullmq://%[2]s/app:v2/expiry (or ?prefix=app%%3Av2 in a URL)`},
		{name: "a typo",
			setup: func(t *testing.T, q bullmqtest.Queue) {
				for i := range 7 {
					openedQueue(t, q, "bull", "expiry-"+strconv.Itoa(i))
				}
			},
			queue: "expirry", prefix: "bull",
			want: `BullMQ queue %[1]s does not exist: no Queue opened it under prefix "bull", nor under another prefix (a typo?); ` +
				`queues there: bull/expiry-0, bull/expiry-1, bull/expiry-2, bull/expiry-3, bull/expiry-4, …`},
		{name: "no queue at all",
			setup: func(t *testing.T, q bullmqtest.Queue) {},
			queue: "expiry", prefix: "bull",
			want: `BullMQ queue %[1]s does not exist: no Queue opened it under prefix "bull", and this Redis database holds no BullMQ queue at all: ` +
				`is the connection's server and database the right one?`},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			q := bullmqtest.NewQueueOn(t, startOwnRedis(t).addr())
			c.setup(t, q)
			ref := q.Ref
			if c.queue != "" {
				ref.Queue = c.queue
			}
			ref.Prefix = c.prefix
			want := fmt.Sprintf(c.want, ref.Name(), ref.Conn, q.Ref.Queue, q.Ref.Prefix)
			capture, topology, retry := notFoundEverywhere(t, q, ref)
			var missing *bullmq.QueueNotFoundError
			if !errors.As(capture, &missing) || capture.Error() != want {
				t.Errorf("capture: %v\nwant %s", capture, want)
			}
			if topology != want {
				t.Errorf("summary: %s\nwant %s", topology, want)
			}
			var failure *replay.PublishFailure
			if !errors.As(retry, &failure) || failure.Reason != want {
				t.Errorf("replay: %v\nwant %s", retry, want)
			}
		})
	}
}

// TestQueueNotFoundLooksAtAFewThousandKeys: the look for the queue under
// other prefixes stops after a few thousand keys, and says so.
func TestQueueNotFoundLooksAtAFewThousandKeys(t *testing.T) {
	t.Parallel()
	q := bullmqtest.NewQueueOn(t, startOwnRedis(t).addr())
	ctx := context.Background()
	for lo := 0; lo < 20000; lo += 1000 {
		pipe := q.Client.Pipeline()
		for i := lo; i < lo+1000; i++ {
			pipe.Set(ctx, "cache:"+strconv.Itoa(i), "x", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := bullmq.Version(ctx, q.Client, q.Ref)
	var missing *bullmq.QueueNotFoundError
	if !errors.As(err, &missing) || !missing.Partial || !strings.Contains(err.Error(), "none of the first 5000 or so keys of this Redis database is a BullMQ queue's") {
		t.Errorf("Version: %v, want a *QueueNotFoundError that looked at part of the keys", err)
	}
}
