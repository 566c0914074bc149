package bullmq_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
)

// redisAddr is the Redis the tests use: EXPIRYCTL_TEST_REDIS, or the one
// scripts/services.sh starts.
func redisAddr() string {
	if a := os.Getenv("EXPIRYCTL_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// testQueue is a queue of the test's own: a prefix no other test uses,
// whose keys are deleted when the test ends.
type testQueue struct {
	ref    bullmq.Ref
	client *redis.Client
}

// newQueue returns a queue named after the test, under a random prefix,
// on redisAddr (or addr when given), after checking that Redis answers.
func newQueue(tb testing.TB, addr ...string) testQueue {
	tb.Helper()
	a := redisAddr()
	if len(addr) > 0 {
		a = addr[0]
	}
	random := make([]byte, 4)
	_, _ = rand.Read(random)
	ref, err := bullmq.ParseRef("bullmq://" + a + "/0/" + sanitize(tb.Name()) + "?prefix=test-" + hex.EncodeToString(random))
	if err != nil {
		tb.Fatal(err)
	}
	client := bullmq.Dial(ref)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		tb.Fatalf("a Redis server is required for this test and is not reachable at %s (%v).\n"+
			"Start it with scripts/services.sh, or set EXPIRYCTL_TEST_REDIS=HOST:PORT.", a, err)
	}
	q := testQueue{ref: ref, client: client}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A test that stopped its own Redis has nothing left to delete.
		iter := client.Scan(ctx, 0, ref.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		_ = client.Close()
	})
	return q
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// key is one of the queue's keys.
func (q testQueue) key(name string) string { return q.ref.Prefix + ":" + q.ref.Queue + ":" + name }

// keyNames are every key under the queue's prefix, sorted.
func (q testQueue) keyNames(tb testing.TB) []string {
	tb.Helper()
	var names []string
	iter := q.client.Scan(context.Background(), 0, q.ref.Prefix+":*", 1000).Iterator()
	for iter.Next(context.Background()) {
		names = append(names, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// digest is a hash over every key of the queue but those named in
// except: its name, type, content and whether it expires; what proves
// that a read changed nothing. It reads content rather than DUMP's bytes:
// a hash or set Redis keeps as a hash table dumps in its table's order,
// which a mere lookup's incremental rehash can change.
func (q testQueue) digest(tb testing.TB, except ...string) string {
	tb.Helper()
	h := sha256.New()
	ctx := context.Background()
	for _, k := range q.keyNames(tb) {
		if slices.Contains(except, strings.TrimPrefix(k, q.key(""))) {
			continue
		}
		typ := q.client.Type(ctx, k).Val()
		var content any
		switch typ {
		case "string":
			content = q.client.Get(ctx, k).Val()
		case "hash":
			content = q.client.HGetAll(ctx, k).Val() // fmt prints a map sorted
		case "list":
			content = q.client.LRange(ctx, k, 0, -1).Val()
		case "set":
			content = slices.Sorted(slices.Values(q.client.SMembers(ctx, k).Val()))
		case "zset":
			content = q.client.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "stream":
			content = q.client.XRange(ctx, k, "-", "+").Val()
		default:
			tb.Fatalf("digest: key %s is a %s", k, typ)
		}
		expires := q.client.PTTL(ctx, k).Val() >= 0
		fmt.Fprintf(h, "%q %s %v %v\n", k, typ, expires, content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

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
func (q testQueue) seed(tb testing.TB, version string, jobs ...failedJob) {
	tb.Helper()
	ctx := context.Background()
	pipe := q.client.Pipeline()
	if version != "" {
		pipe.HSet(ctx, q.key("meta"), "opts.maxLenEvents", "10000", "version", version)
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
		pipe.HSet(ctx, q.key(j.ID), fields)
		pipe.ZAdd(ctx, q.key("failed"), redis.Z{Score: float64(j.FinishedOn), Member: j.ID})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		tb.Fatal(err)
	}
}

// hash is a job's hash.
func (q testQueue) hash(tb testing.TB, id string) map[string]string {
	tb.Helper()
	h, err := q.client.HGetAll(context.Background(), q.key(id)).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return h
}
