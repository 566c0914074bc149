package replay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClearFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rate float64
		took time.Duration
		want int
	}{
		{0.5, 0, 1}, {20, 0, 1}, {150, 0, 3}, {1000, 0, 20}, {50_000, 0, 1000}, {1e9, 0, 1000},
		// A healthy round trip keeps the fiftieth of a second.
		{150, 2 * time.Millisecond, 3},
		// A slow one: the group covers twice the round trip, up to a chunk.
		{100, 500 * time.Millisecond, 100}, {100, 250 * time.Millisecond, 50}, {1000, 400 * time.Millisecond, 800},
		{1000, 5 * time.Second, 1000},
	} {
		if got := clearFor(tt.rate, tt.took); got != tt.want {
			t.Errorf("clearFor(%g, %s) = %d, want %d", tt.rate, tt.took, got, tt.want)
		}
	}
}

func TestClearGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                           string
		cleared, queued, limit, clearN int
		want                           int
	}{
		{"a leg's first item", 0, 3000, 1, 1000, 1},
		{"a leg doubling, nothing left cleared", 0, 3000, 8, 1000, 8},
		{"a leg doubling, half its limit left cleared", 4, 3000, 8, 1000, 4},
		{"a leg doubling, waits for half its limit", 5, 3000, 8, 1000, 0},
		{"full speed, a clearance's worth left", 1000, 3000, 2000, 1000, 1000},
		{"full speed, half a clearance to clear", 1500, 3000, 2000, 1000, 500},
		{"full speed, waits for half a clearance", 1911, 3000, 2000, 1000, 0},
		{"full speed, nothing left cleared", 0, 3000, 2000, 1000, 1000},
		{"the queue's last items, however few", 0, 7, 2000, 1000, 7},
		{"room for half a clearance, only seven queued", 1400, 1407, 2000, 1000, 7},
		{"all the limit cleared", 2000, 3000, 2000, 1000, 0},
		{"nothing queued uncleared", 300, 300, 2000, 1000, 0},
		{"a slow rate, one item a clearance", 0, 10, 2, 1, 1},
		{"a slow rate, one cleared and one to clear", 1, 10, 2, 1, 1},
	} {
		if got := clearGroup(tt.cleared, tt.queued, tt.limit, tt.clearN); got != tt.want {
			t.Errorf("%s: clearGroup(%d, %d, %d, %d) = %d, want %d", tt.name, tt.cleared, tt.queued, tt.limit, tt.clearN, got, tt.want)
		}
	}
}

// unansweredBroker publishes through Broker, waits for the copy to reach
// the broker, then says the channel went before the confirm came: every
// item is left publishing, in doubt, as a runner killed after its publishes
// leaves them.
type unansweredBroker struct{ Broker }

// Encode is its broker's: the copies are what a real run sends.
func (b unansweredBroker) Encode(c Copy) (Message, error) { return b.Broker.(Encoder).Encode(c) }

func (b unansweredBroker) Publish(ctx context.Context, m Message) (Pending, error) {
	p, err := b.Broker.Publish(ctx, m)
	if err != nil {
		return nil, err
	}
	<-p.Done()
	return lostConfirm{}, p.Outcome()
}

type lostConfirm struct{}

func (lostConfirm) Done() <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

func (lostConfirm) Outcome() error {
	return &BrokerLostError{Err: errors.New("the channel closed before the confirm")}
}

// TestRunPublishesAnItemAtMostPublishBoundTimes resumes a request whose
// every run loses a broker answer, and so stops with its item in doubt,
// until one completes: each item reaches the queue PublishBound times, its
// sends count exactly those copies, and then it fails, saying why, instead
// of going out again.
func TestRunPublishesAnItemAtMostPublishBoundTimes(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 3)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 50}, ids)
	var last RunResult
	runs := 0
	for ; runs < 2*PublishBound*len(ids); runs++ {
		r := b.runner(t)
		r.Broker = unansweredBroker{r.Broker}
		res, err := r.Run(ctx, req.ID)
		if err == nil {
			last = res
			break
		}
		var interrupted *InterruptedError
		if !errors.As(err, &interrupted) || res.Published == 0 {
			t.Fatalf("run %d: %+v, %v; want an item published and the run interrupted with it in doubt", runs+1, res, err)
		}
	}
	if last.Status != StatusCompleted || last.Published != 0 || last.Failed != len(ids) {
		t.Fatalf("after %d runs: %+v; want the last completed with nothing published and every item failed", runs+1, last)
	}
	for _, f := range last.FailedItems {
		if !strings.Contains(f.Reason, "publish-bound") {
			t.Errorf("item %d failed with %q, want the rule publish-bound named", f.DeadLetterID, f.Reason)
		}
	}
	copies := map[int64]int{}
	for _, d := range runDrain(t, b.conn, b.queue, len(ids), 10*time.Second) {
		copies[d.Headers[HeaderReplayItem].(int64)]++
	}
	for _, id := range ids {
		var sends int
		if err := b.pool.QueryRow(ctx, `SELECT sends FROM expiryctl.replay_items WHERE request_id = $1 AND dead_letter_id = $2`,
			req.ID, id).Scan(&sends); err != nil {
			t.Fatal(err)
		}
		// A leg clears one item before its first publish (clearLimit), so
		// runs that die at their first lost answer count only what they sent.
		if copies[id] != PublishBound || sends != copies[id] {
			t.Errorf("item %d reached the queue %d times and counted %d sends; want %d of each", id, copies[id], sends, PublishBound)
		}
	}
}
