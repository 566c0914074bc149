package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// heldBack is the RabbitMQ source with its deliveries held back for a
// while before they are handed on, as they are when the client is short
// of CPU: the broker has sent every letter (none is ready in the queue)
// and the collector has read none of them when its linger first fires.
type heldBack struct {
	*broker.DLQSource
	out chan deadletter.Delivery
}

func holdBack(src *broker.DLQSource, d time.Duration) *heldBack {
	h := &heldBack{DLQSource: src, out: make(chan deadletter.Delivery)}
	go func() {
		defer close(h.out)
		time.Sleep(d)
		for m := range src.Deliveries() {
			h.out <- m
		}
	}()
	return h
}

func (h *heldBack) Deliveries() <-chan deadletter.Delivery { return h.out }

// TestIngestReadsLettersStillOnTheirWay: an ingest without --follow that
// finds the queue empty while letters it was sent are still in the client
// stores them all before it ends, and leaves the queue empty. Before the
// consumer was stopped at that point, this run ended at the first linger
// with nothing stored and every letter back in the queue.
func TestIngestReadsLettersStillOnTheirWay(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	const n = 300
	for i := range n {
		b.publish(t, b.dlq, workerLetter(i, "DatabaseTimeout"))
	}
	src, err := broker.OpenDLQSource(b.conn, b.dlq, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Every letter is out of the queue and in the client before the
	// ingest starts: the queue counts none ready.
	deadline := time.Now().Add(10 * time.Second)
	for b.ready(t, b.dlq) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the broker still holds %d letters ready after 10 s", b.ready(t, b.dlq))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stats, err := deadletter.Ingest(context.Background(), b.pool, holdBack(src, 400*time.Millisecond),
		deadletter.IngestOptions{Queue: b.dlq, Actor: "test", Linger: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Stored != n || b.count(t, "source_queue = $1", b.dlq) != n {
		t.Fatalf("stored %d letters (%d in the archive), want %d", stats.Stored, b.count(t, "source_queue = $1", b.dlq), n)
	}
	_ = src.Close()
	if ready := b.ready(t, b.dlq); ready != 0 {
		t.Errorf("%d letters back in the queue after the ingest, want none", ready)
	}
}
