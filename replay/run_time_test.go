package replay

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// timedLetter is letter n, failed in the bundle's queue, with its hold due
// at holdUntil and extra headers.
func (b *runBundle) timedLetter(n int, holdUntil time.Time, extra amqp.Table) deadletter.Message {
	m := runLetter(n, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue, extra: extra})
	m.Body = fmt.Appendf(nil, `{"reservation_id":"r-%d","expected_version":3,"hold_until":%q,"idempotency_key":"expire:r-%d:v3"}`,
		n, holdUntil.UTC().Format(time.RFC3339Nano), n)
	return m
}

// TestRunWaitsForItsTime: a replay scheduled with --not-before publishes
// nothing before it; a letter whose hold is not yet due waits for its
// deadline, and one whose last error carried a Retry-After (an HTTP date
// here) for that; the run says what it waits for meanwhile. A request
// that says --include-not-due publishes the same kind of letters at once.
func TestRunWaitsForItsTime(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	now := time.Now()
	notBefore := now.Add(1500 * time.Millisecond)
	dueLater := now.Add(3 * time.Second)
	// An HTTP date has whole seconds: the second after dueLater's.
	retryAt := dueLater.Add(time.Second).Truncate(time.Second)
	past := now.Add(-time.Hour)
	ids := b.seed(t,
		b.timedLetter(1, past, nil),
		b.timedLetter(2, dueLater, nil),
		b.timedLetter(3, past, amqp.Table{"Retry-After": retryAt.UTC().Format(http.TimeFormat)}))
	req := b.approved(t, NewRequest{Rate: 100, Canary: intPtr(0), NotBefore: &notBefore}, ids)
	if req.NotBefore == nil || !req.NotBefore.Equal(notBefore.Truncate(time.Microsecond)) || req.IncludeNotDue {
		t.Fatalf("request not before %v, include not due %v", req.NotBefore, req.IncludeNotDue)
	}
	d, err := b.as("bob").Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tm := d.Timing; tm == nil || tm.PastDue != 2 || tm.NotYetDue != 1 || tm.RetryAfter != 1 || tm.Held != 3 ||
		tm.HeldUntil == nil || !tm.HeldUntil.Equal(retryAt) {
		t.Errorf("the approver sees timing %+v, want 2 past due, 1 not yet, 1 Retry-After, 3 held until %s", tm, retryAt)
	}

	r := b.runner(t)
	var mu sync.Mutex
	var times []time.Time
	r.Broker = &timedBroker{Broker: r.Broker, mu: &mu, times: &times}
	var waited []time.Time
	r.Progress = func(p Progress) {
		if p.Phase == "not-before" {
			waited = append(waited, p.WaitUntil)
		}
	}
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Confirmed != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	for i, want := range []time.Time{notBefore, dueLater, retryAt} {
		if times[i].Before(want) {
			t.Errorf("item %d went out at %s, before its time %s", i+1, times[i].Format(time.StampMilli), want.Format(time.StampMilli))
		}
	}
	// The wait is the database's answer, turned into the runner's time.
	if len(waited) == 0 || waited[0].Sub(notBefore).Abs() > 100*time.Millisecond {
		t.Errorf("the run reported waiting until %v, want %s first", waited, notBefore)
	}

	// The same kind of letters, with --include-not-due: out at once.
	later := time.Now().Add(time.Hour)
	now = time.Now()
	ids = b.seed(t,
		b.timedLetter(4, later, nil),
		b.timedLetter(5, past, amqp.Table{"x-retry-after": int64(3600)}))
	req = b.approved(t, NewRequest{Rate: 100, Canary: intPtr(0), IncludeNotDue: true}, ids)
	times = nil
	if res, err := r.Run(ctx, req.ID); err != nil || res.Confirmed != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if len(times) != 2 || times[1].Sub(now) > 5*time.Second {
		t.Errorf("with --include-not-due the letters went out at %v, want at once", times)
	}
}
