package e2e_test

import (
	"maps"
	"slices"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// declareReplayTarget declares a topic exchange and a durable queue of the
// test's own, bound for reservation.expire, for letters to name as their
// origin; both are deleted when the test ends.
func declareReplayTarget(t *testing.T, conn *amqp.Connection) (exchange, target string) {
	t.Helper()
	exchange, target = amqptest.Name(t, ".x"), amqptest.Name(t, ".target")
	amqptest.DeleteOnCleanup(t, []string{target}, []string{exchange})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(target, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(target, "reservation.expire", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	return exchange, target
}

// copyCounter counts the copies of a replay request's items that reach a
// queue, and the messages there that are no item of it.
type copyCounter struct {
	mu        sync.Mutex
	delivered map[int64]int
	outside   int
}

// countCopies consumes target through conn until the test ends, counting
// each copy of an item of request (one of letters) and each message that
// is not one.
func countCopies(t *testing.T, conn *amqp.Connection, target string, request int64, letters []int64) *copyCounter {
	t.Helper()
	c := &copyCounter{delivered: map[int64]int{}}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(target, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var consuming sync.WaitGroup
	consuming.Go(func() {
		for d := range deliveries {
			item, isInt := d.Headers[replay.HeaderReplayItem].(int64)
			c.mu.Lock()
			if !isInt || d.Headers[replay.HeaderReplayRequest] != request || !slices.Contains(letters, item) {
				c.outside++
			} else {
				c.delivered[item]++
			}
			c.mu.Unlock()
		}
	})
	t.Cleanup(func() { _ = ch.Close(); consuming.Wait() })
	return c
}

// counts is the copies counted so far per item, and the messages outside
// the request.
func (c *copyCounter) counts() (map[int64]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.delivered), c.outside
}

// copyTally is what became of a request's items on the queue.
type copyTally struct {
	// reached and lost count the letters with a copy and without one;
	// copies counts every copy; withoutCopy counts the items confirmed
	// whose copy never came; outside, the messages of no item.
	reached, lost, copies, withoutCopy, outside int
}

// tally counts what became of letters, confirmed the items recorded so.
func (c *copyCounter) tally(letters, confirmed []int64) copyTally {
	delivered, outside := c.counts()
	tl := copyTally{outside: outside}
	for _, l := range letters {
		if delivered[l] > 0 {
			tl.reached++
		} else {
			tl.lost++
		}
		tl.copies += delivered[l]
	}
	for _, l := range confirmed {
		if delivered[l] == 0 {
			tl.withoutCopy++
		}
	}
	return tl
}
