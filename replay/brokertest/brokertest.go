// Package brokertest is the conformance suite every target driver passes
// (a broker's, a cloud queue's): what the replay runner relies on a replay.Broker
// for, asked of a real server, in the manner of river's riverdrivertest.
// A driver's test gives Run a Harness on a queue of its own; Run checks
// that a confirmed publish is on the queue whole, that a publish to a
// queue that does not exist fails its item rather than vanishing, and
// that the queue's depth reads what waits there.
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/replay"
)

// Received is a message taken off the test's queue.
type Received struct {
	Body []byte
	// Seq is the "seq" header or attribute Message put on it.
	Seq string
}

// Harness is one driver on one test's own target queue.
type Harness struct {
	Broker replay.Broker
	// Message is a message to the test's queue with body and a "seq"
	// header or attribute holding seq.
	Message func(body []byte, seq string) replay.Message
	// Missing is a message to a queue that does not exist.
	Missing func(body []byte) replay.Message
	// Queue names the test's queue as QueueDepth takes it; MissingQueue
	// one that does not exist.
	Queue, MissingQueue string
	// Receive takes n messages off the test's queue, failing t when they
	// do not come.
	Receive func(t *testing.T, n int) []Received
}

// settle bounds the wait for one publish's answer.
const settle = 30 * time.Second

// Run runs every case against setup's harness, each on a fresh queue.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	t.Run("ConfirmedMessagesArriveWhole", func(t *testing.T) {
		h := setup(t)
		const n = 20
		pending := make([]replay.Pending, n)
		bodies := make([][]byte, n)
		for i := range n {
			bodies[i] = fmt.Appendf(nil, `{"reservation_id":"r-%d","note":"\u00e9\u6f22 <&> \"q\""}`, i)
			p, err := h.Broker.Publish(context.Background(), h.Message(bodies[i], fmt.Sprint(i)))
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			pending[i] = p
		}
		for i, p := range pending {
			if err := outcome(t, p); err != nil {
				t.Errorf("publish %d was not confirmed: %v", i, err)
			}
		}
		got := h.Receive(t, n)
		seen := map[string]bool{}
		for _, r := range got {
			var i int
			if _, err := fmt.Sscan(r.Seq, &i); err != nil || i < 0 || i >= n {
				t.Fatalf("a message with seq %q", r.Seq)
			}
			if string(r.Body) != string(bodies[i]) {
				t.Errorf("message %d: body %q, want %q", i, r.Body, bodies[i])
			}
			seen[r.Seq] = true
		}
		if len(seen) != n {
			t.Errorf("%d distinct messages arrived, want %d", len(seen), n)
		}
	})

	t.Run("APublishToNoQueueFailsItsItem", func(t *testing.T) {
		h := setup(t)
		p, err := h.Broker.Publish(context.Background(), h.Missing([]byte(`{"reservation_id":"r-lost"}`)))
		if err != nil {
			t.Fatalf("publish: %v (an error here means the broker is gone, not that the message failed)", err)
		}
		var failure *replay.PublishFailure
		if err := outcome(t, p); !errors.As(err, &failure) {
			t.Errorf("a publish to a queue that does not exist settled as %v, want a *replay.PublishFailure", err)
		}
	})

	t.Run("QueueDepthReadsWhatWaits", func(t *testing.T) {
		h := setup(t)
		ctx := context.Background()
		if depth, exists, err := h.Broker.QueueDepth(ctx, h.Queue); err != nil || !exists || depth != 0 {
			t.Errorf("QueueDepth of the empty queue = %d, %v, %v; want 0, true", depth, exists, err)
		}
		for i := range 5 {
			p, err := h.Broker.Publish(ctx, h.Message([]byte(`{}`), fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := outcome(t, p); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(settle)
		for {
			depth, exists, err := h.Broker.QueueDepth(ctx, h.Queue)
			if err == nil && exists && depth == 5 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("QueueDepth after 5 confirmed publishes = %d, %v, %v; want 5, true", depth, exists, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, exists, err := h.Broker.QueueDepth(ctx, h.MissingQueue); err != nil || exists {
			t.Errorf("QueueDepth of a queue that does not exist: exists %v, %v; want false, nil", exists, err)
		}
		if routes, ok := h.Broker.(replay.Routes); ok {
			if ok, err := routes.RouteExists(ctx, ""); err != nil || !ok {
				t.Errorf("the default route, through which a queue is named: %v, %v; want true", ok, err)
			}
		}
		seqs := make([]string, 0, 5)
		for _, r := range h.Receive(t, 5) {
			seqs = append(seqs, r.Seq)
		}
		slices.Sort(seqs)
		if !slices.Equal(seqs, []string{"0", "1", "2", "3", "4"}) {
			t.Errorf("received seqs %v, want 0-4", seqs)
		}
	})
}

// outcome waits for p to settle and returns its outcome.
func outcome(t *testing.T, p replay.Pending) error {
	t.Helper()
	select {
	case <-p.Done():
		return p.Outcome()
	case <-time.After(settle):
		t.Fatalf("a publish did not settle in %s", settle)
		return nil
	}
}
