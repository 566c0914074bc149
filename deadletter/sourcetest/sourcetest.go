// Package sourcetest is the conformance suite every dead-letter source
// driver passes (RabbitMQ, SQS, …), in the manner of river's
// riverdrivertest: what deadletter's ingest relies on a source for, asked
// of a real server. A driver's test gives Run a Harness on a queue of its
// own; Run checks delivery, acknowledgement through a tag, return of what
// was not acknowledged, competing consumers and the ready count.
package sourcetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// Source is what a driver's source offers the ingest and its caller.
type Source interface {
	deadletter.Source
	Close() error
	QueueName() string
}

// Harness is one driver on one test's own dead-letter queue.
type Harness struct {
	// Publish puts each body on the dead-letter queue, in order, with a
	// header or attribute "seq" holding its index as text.
	Publish func(t *testing.T, bodies [][]byte)
	// Open opens a source on the queue that holds at most prefetch
	// messages not yet acknowledged; the suite closes it.
	Open func(t *testing.T, prefetch int) Source
	// Seq reads the "seq" that Publish put on a message.
	Seq func(m deadletter.Message) (string, bool)
}

// wait bounds each wait for a delivery: an SQS server hands messages out
// in long polls, and a source released on Close may take a poll to see
// them again.
const wait = 30 * time.Second

// Run runs every case against setup's harness, each on a fresh queue.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	t.Run("DeliversEveryMessageByteForByte", func(t *testing.T) {
		h := setup(t)
		bodies := numbered(25)
		bodies[3] = []byte("{\"reservation_id\":\"r-\u00e9\u6f22\",\"note\":\"<&>\\\"'\"}")
		h.Publish(t, bodies)
		src := open(t, h, 100)
		got := receive(t, h, src, len(bodies))
		if !slices.IsSortedFunc(got, func(a, b deadletter.Delivery) int { return cmp.Compare(a.Tag, b.Tag) }) {
			t.Errorf("tags are not increasing: %v", tags(got))
		}
		for _, d := range got {
			seq, _ := h.Seq(d.Message)
			i := index(t, seq, len(bodies))
			if string(d.Message.Body) != string(bodies[i]) {
				t.Errorf("message %s: body %q, want %q", seq, d.Message.Body, bodies[i])
			}
		}
		if n := distinct(t, h, got); n != len(bodies) {
			t.Errorf("%d distinct messages of %d", n, len(bodies))
		}
	})

	t.Run("AcknowledgeRemovesExactlyThoseUpToTheTag", func(t *testing.T) {
		h := setup(t)
		h.Publish(t, numbered(20))
		src := open(t, h, 100)
		got := receive(t, h, src, 20)
		if err := src.Acknowledge(got[9].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		acked := seqs(t, h, got[:10])
		if err := src.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		again := receive(t, h, open(t, h, 100), 10)
		for _, s := range seqs(t, h, again) {
			if slices.Contains(acked, s) {
				t.Errorf("message %s came back after it was acknowledged", s)
			}
		}
	})

	t.Run("CloseReturnsWhatWasNotAcknowledged", func(t *testing.T) {
		h := setup(t)
		h.Publish(t, numbered(5))
		src := open(t, h, 100)
		first := seqs(t, h, receive(t, h, src, 5))
		if err := src.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		second := seqs(t, h, receive(t, h, open(t, h, 100), 5))
		slices.Sort(first)
		slices.Sort(second)
		if !slices.Equal(first, second) {
			t.Errorf("after Close without acknowledging, got %v again, want %v", second, first)
		}
	})

	t.Run("CompetingSourcesNeverShareAMessage", func(t *testing.T) {
		h := setup(t)
		const n = 40
		h.Publish(t, numbered(n))
		a, b := open(t, h, 10), open(t, h, 10)
		seen := map[string]int{}
		deadline := time.After(wait)
		for len(seen) < n {
			var d deadletter.Delivery
			var src Source
			select {
			case d = <-a.Deliveries():
				src = a
			case d = <-b.Deliveries():
				src = b
			case <-deadline:
				t.Fatalf("received %d distinct messages of %d", len(seen), n)
			}
			s, _ := h.Seq(d.Message)
			seen[s]++
			if seen[s] > 1 {
				t.Errorf("message %s delivered twice while held", s)
			}
			if err := src.Acknowledge(d.Tag); err != nil {
				t.Fatalf("Acknowledge: %v", err)
			}
		}
	})

	t.Run("PrefetchBoundsWhatIsHeld", func(t *testing.T) {
		h := setup(t)
		h.Publish(t, numbered(30))
		src := open(t, h, 10)
		got := receive(t, h, src, 10)
		select {
		case d := <-src.Deliveries():
			t.Errorf("delivery %d beyond a prefetch of 10 before any acknowledgement", d.Tag)
		case <-time.After(2 * time.Second):
		}
		if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		receive(t, h, src, 10)
	})

	t.Run("ReadyIsZeroOnceAllIsAcknowledged", func(t *testing.T) {
		h := setup(t)
		src := open(t, h, 100)
		if n, err := src.Ready(); err != nil || n != 0 {
			t.Errorf("Ready on an empty queue = %d, %v; want 0", n, err)
		}
		h.Publish(t, numbered(8))
		got := receive(t, h, src, 8)
		if err := src.Acknowledge(got[len(got)-1].Tag); err != nil {
			t.Fatalf("Acknowledge: %v", err)
		}
		if n, err := src.Ready(); err != nil || n != 0 {
			t.Errorf("Ready after acknowledging all = %d, %v; want 0", n, err)
		}
		if src.QueueName() == "" {
			t.Error("QueueName is empty: letters and the audit trail would name no queue")
		}
	})
}

func open(t *testing.T, h Harness, prefetch int) Source {
	t.Helper()
	src := h.Open(t, prefetch)
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// receive takes n deliveries from src, failing t when they do not come.
func receive(t *testing.T, h Harness, src Source, n int) []deadletter.Delivery {
	t.Helper()
	got := make([]deadletter.Delivery, 0, n)
	deadline := time.After(wait)
	for len(got) < n {
		select {
		case d, ok := <-src.Deliveries():
			if !ok {
				t.Fatalf("deliveries ended after %d of %d: %v", len(got), n, errOf(src))
			}
			got = append(got, d)
		case <-deadline:
			t.Fatalf("received %d of %d messages in %s (seqs %v)", len(got), n, wait, seqs(t, h, got))
		}
	}
	return got
}

func errOf(src Source) error {
	if e, ok := src.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

func numbered(n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"reservation_id":"r-%d","idempotency_key":"expire:r-%d:v1"}`, i, i)
	}
	return bodies
}

func seqs(t *testing.T, h Harness, ds []deadletter.Delivery) []string {
	t.Helper()
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		s, ok := h.Seq(d.Message)
		if !ok {
			t.Fatalf("delivery %d has no seq: %+v", d.Tag, d.Message.Headers)
		}
		out = append(out, s)
	}
	return out
}

func distinct(t *testing.T, h Harness, ds []deadletter.Delivery) int {
	s := seqs(t, h, ds)
	slices.Sort(s)
	return len(slices.Compact(s))
}

func index(t *testing.T, seq string, n int) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscan(seq, &i); err != nil || i < 0 || i >= n {
		t.Fatalf("seq %q is not an index below %d", seq, n)
	}
	return i
}

func tags(ds []deadletter.Delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.Tag
	}
	return out
}
