package bullmq

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/expiryctl/expiryctl/deadletter"
)

// The bounds of the look for a missing queue under other prefixes: a
// hint is worth a few round trips, not a walk of a large database.
const (
	// hintScanCount is each SCAN's COUNT.
	hintScanCount = 1000
	// hintScanKeys is about how many keys the look examines at most.
	hintScanKeys = 5000
	// hintOthers is how many other queues the error lists.
	hintOthers = 5
)

// QueueNotFoundError is a BullMQ queue with no meta hash under its key
// prefix: no BullMQ Queue opened it there, so there is nothing to capture
// or retry. Most often the name has the wrong prefix (a URL without
// ?prefix=, a name's PREFIX mistyped), so the error says under which
// prefixes the same Redis database holds a queue of that name, or, when
// none, which queues it does hold. Both come from a SCAN of the database's
// meta keys that stops after about 5000 keys (Partial).
type QueueNotFoundError struct {
	// Queue is the queue's name, bullmq://CONNECTION/PREFIX/QUEUE;
	// Prefix and Name its PREFIX and QUEUE.
	Queue, Prefix, Name string
	// Elsewhere are the prefixes under which a queue named Name exists,
	// sorted; Suggest names the queue under the first.
	Elsewhere []string
	Suggest   string
	// Others are up to five other queues found, as PREFIX/QUEUE, sorted;
	// More says there were more.
	Others []string
	More   bool
	// Partial says the SCAN stopped before it had seen every key, and
	// Unsearched why no look was made (a Redis that refuses SCAN).
	Partial    bool
	Unsearched string
}

func (e *QueueNotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "BullMQ queue %s does not exist: no Queue opened it under prefix %q", e.Queue, e.Prefix)
	switch {
	case e.Unsearched != "":
		fmt.Fprintf(&b, " (other prefixes were not searched: %s)", e.Unsearched)
		return b.String()
	case len(e.Elsewhere) == 1:
		fmt.Fprintf(&b, "; Redis holds a queue %q under prefix %q: name it %s (or ?prefix=%s in a URL)",
			e.Name, e.Elsewhere[0], e.Suggest, url.QueryEscape(e.Elsewhere[0]))
	case len(e.Elsewhere) > 1:
		fmt.Fprintf(&b, "; Redis holds a queue %q under prefixes %s: name it with one of them, e.g. %s (or ?prefix=%s in a URL)",
			e.Name, quoted(e.Elsewhere), e.Suggest, url.QueryEscape(e.Elsewhere[0]))
	case len(e.Others) > 0:
		fmt.Fprintf(&b, ", nor under another prefix (a typo?); queues there: %s", strings.Join(e.Others, ", "))
		if e.More {
			b.WriteString(", …")
		}
	case e.Partial:
		fmt.Fprintf(&b, ", and none of the first %d or so keys of this Redis database is a BullMQ queue's: is the connection's server and database the right one?", hintScanKeys)
		return b.String()
	default:
		b.WriteString(", and this Redis database holds no BullMQ queue at all: is the connection's server and database the right one?")
	}
	if e.Partial {
		fmt.Fprintf(&b, " (from the first %d or so keys of a larger database)", hintScanKeys)
	}
	return b.String()
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// notFound is the *QueueNotFoundError of ref, whose meta hash is missing,
// with what a bounded SCAN of the database's meta keys (PREFIX:QUEUE:meta:
// a queue name has no ':', a prefix may) finds under other prefixes. A
// SCAN that fails leaves the hint out, not the error.
func notFound(ctx context.Context, client redis.UniversalClient, ref Ref) *QueueNotFoundError {
	e := &QueueNotFoundError{Queue: ref.Name(), Prefix: ref.Prefix, Name: ref.Queue}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	elsewhere, others := map[string]bool{}, map[string]bool{}
	var cursor uint64
	for range hintScanKeys / hintScanCount {
		keys, next, err := client.Scan(ctx, cursor, "*:meta", hintScanCount).Result()
		if err != nil {
			e.Unsearched = err.Error()
			return e
		}
		for _, k := range keys {
			base := strings.TrimSuffix(k, ":meta")
			i := strings.LastIndexByte(base, ':')
			if i <= 0 || i == len(base)-1 {
				continue
			}
			prefix, queue := base[:i], base[i+1:]
			switch {
			case queue == ref.Queue && prefix != ref.Prefix:
				elsewhere[prefix] = true
			case queue != ref.Queue:
				others[url.PathEscape(prefix)+"/"+url.PathEscape(queue)] = true
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	e.Partial = cursor != 0
	if len(elsewhere) > 0 {
		for p := range elsewhere {
			e.Elsewhere = append(e.Elsewhere, p)
		}
		slices.Sort(e.Elsewhere)
		suggest := ref
		suggest.Prefix = e.Elsewhere[0]
		e.Suggest = suggest.Name()
		return e
	}
	for q := range others {
		e.Others = append(e.Others, q)
	}
	slices.Sort(e.Others)
	if len(e.Others) > hintOthers {
		e.Others, e.More = e.Others[:hintOthers], true
	}
	return e
}

// Is makes the error deadletter.ErrQueueNotFound, which a command exits 3
// on, on every queue system alike.
func (e *QueueNotFoundError) Is(target error) bool { return target == deadletter.ErrQueueNotFound }
