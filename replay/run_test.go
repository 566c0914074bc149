package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

func TestRunOnlyApprovedRequestsRun(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 5)
	r := b.runner(t)

	pending := b.pending(t, NewRequest{}, ids[:1])
	_, err := r.Run(ctx, pending.ID)
	wantRunRefusal(t, err, "approved-to-run")

	rejected := b.pending(t, NewRequest{}, ids[1:2])
	if _, err := b.as("bob").Reject(ctx, rejected.ID, ReviewOptions{Why: "no"}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(ctx, rejected.ID)
	wantRunRefusal(t, err, "terminal")

	cancelled := b.approved(t, NewRequest{}, ids[2:3])
	if _, err := b.as("alice").Cancel(ctx, cancelled.ID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(ctx, cancelled.ID)
	wantRunRefusal(t, err, "terminal")

	_, err = r.Run(ctx, 999999)
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("run of a missing request: %v, want NotFoundError", err)
	}

	ok := b.approved(t, NewRequest{Canary: intPtr(0)}, ids[3:])
	res, err := r.Run(ctx, ok.ID)
	if err != nil || res.Status != StatusCompleted || res.Confirmed != 2 {
		t.Fatalf("run of an approved request: %+v, %v; want completed with 2 confirmed", res, err)
	}
	// Completed is over: running it again is refused, and so is an
	// approval of it.
	_, err = r.Run(ctx, ok.ID)
	wantRunRefusal(t, err, "terminal")
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run' AND outcome = 'refused'`); n != 4 {
		t.Errorf("%d refused replay.run audit rows, want 4", n)
	}
}

func TestRunExpiredApprovalIsRefused(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 1)
	req := b.approved(t, NewRequest{}, ids)
	if _, err := b.pool.Exec(ctx, `ALTER TABLE expiryctl.replay_requests DISABLE TRIGGER replay_requests_guard`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE expiryctl.replay_requests SET approval_expires_at = now() - interval '1 second' WHERE id = $1`, req.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `ALTER TABLE expiryctl.replay_requests ENABLE TRIGGER replay_requests_guard`); err != nil {
		t.Fatal(err)
	}
	_, err := b.runner(t).Run(ctx, req.ID)
	wantRunRefusal(t, err, "approval-ttl")
	if got := b.status(t, req.ID); got.Status != StatusExpired {
		t.Errorf("status after a run with an expired approval = %s, want expired", got.Status)
	}
}

func TestRunPublishesTheJobAsItWasWithReplayHeaders(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	letters := []deadletter.Message{
		// Back to the queue it failed in, whose retry queue its x-death names.
		runLetter(1, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue}),
		// No x-original-*: back to the queue it died in.
		runLetter(2, runLetterOpts{originQueue: b.queue}),
		// A job replayed once before carries x-replay-count 1.
		runLetter(3, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue, extra: amqp.Table{"x-replay-request": int64(1), "x-replay-count": int64(1)}}),
	}
	ids := b.seed(t, letters...)
	req := b.approved(t, NewRequest{Canary: intPtr(1)}, ids)
	res, err := b.runner(t).Run(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || res.Confirmed != 3 || res.Published != 3 || res.Failed != 0 || res.Skipped != 0 {
		t.Fatalf("result %+v, want completed with 3 confirmed and published", res)
	}
	got := runDrain(t, b.conn, b.queue, 3, 5*time.Second)
	if len(got) != 3 {
		t.Fatalf("%d messages in the target queue, want 3", len(got))
	}
	byItem := map[int64]amqp.Delivery{}
	for _, d := range got {
		byItem[d.Headers[HeaderReplayItem].(int64)] = d
	}
	for i, id := range ids {
		d, ok := byItem[id]
		if !ok {
			t.Fatalf("no message for item %d", id)
		}
		m := letters[i]
		if !bytes.Equal(d.Body, m.Body) || d.ContentType != m.ContentType || d.MessageId != m.MessageID {
			t.Errorf("item %d: body/content type/message id changed: %q %q %q", id, d.Body, d.ContentType, d.MessageId)
		}
		for _, k := range []string{"x-death", "x-first-death-queue", "x-first-death-reason", "x-first-death-exchange",
			"x-delivery-count", "x-error-class", "x-last-error", "x-attempt-history"} {
			if _, ok := d.Headers[k]; ok {
				t.Errorf("item %d: header %s was replayed; failure bookkeeping must be stripped", id, k)
			}
		}
		if d.Headers["x-tenant"] != "acme-eu-1" || !bytes.Equal(d.Headers["x-trace"].([]byte), []byte{0, 1, 2, 0xff}) || d.Headers["x-priority-hint"] != int32(7) {
			t.Errorf("item %d: producer headers not kept with their wire types: %#v", id, d.Headers)
		}
		wantCount := int64(1)
		if i == 2 {
			wantCount = 2
		}
		if d.Headers[HeaderReplayRequest] != req.ID || d.Headers[HeaderReplayCount] != wantCount ||
			d.Headers[HeaderReplayedBy] != "oncall" || d.Headers[HeaderApprovedBy] != "bob" {
			t.Errorf("item %d: replay headers %v, want request %d, count %d, by oncall, approved by bob", id, d.Headers, req.ID, wantCount)
		}
		if d.Exchange != "" || d.RoutingKey != b.queue {
			t.Errorf("item %d went to %q/%q, want the default exchange to the queue it failed in", id, d.Exchange, d.RoutingKey)
		}
		if d.DeliveryMode != amqp.Persistent {
			t.Errorf("item %d not persistent", id)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'replayed'`); n != 3 {
		t.Errorf("%d letters replayed, want 3", n)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed' AND confirmed_at IS NOT NULL AND attempts = 1`, req.ID); n != 3 {
		t.Errorf("%d items confirmed once, want 3", n)
	}
	for _, action := range []string{"replay.run.start", "replay.canary.start", "replay.canary.pass", "replay.complete"} {
		if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = $1 AND target = $2`, action, requestTarget(req.ID)); n != 1 {
			t.Errorf("%d %s audit rows, want 1", n, action)
		}
	}
	var confirmed int
	if err := b.pool.QueryRow(ctx, `SELECT jsonb_array_length(details->'confirmed') FROM expiryctl.audit_log WHERE action = 'replay.complete'`).Scan(&confirmed); err != nil || confirmed != 3 {
		t.Errorf("replay.complete lists %d confirmed items (%v), want 3", confirmed, err)
	}
}

func TestRunSendsThePropertiesTheLetterDiedWith(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	br, err := newAMQPBroker(b.conn)
	if err != nil {
		t.Fatal(err)
	}
	publisher := br.User()
	_ = br.Close()
	millis := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).UnixMilli()
	full := runLetter(1, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue})
	full.ContentEncoding, full.CorrelationID, full.ReplyTo = "gzip", "corr-16", "booking.replies"
	full.Type, full.AppID, full.Priority, full.UserID = "reservation.expire.v1", "booking-api@4.2.0", 5, publisher
	full.DeliveryMode, full.Expiration = 1, "60000"
	// amqplib passes Date.now() through: milliseconds where seconds belong.
	full.Timestamp = time.Unix(millis, 0)
	foreign := runLetter(2, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue})
	foreign.UserID, foreign.ReplyTo = "booking-svc", "amq.rabbitmq.reply-to"
	ids := b.seed(t, full, foreign)
	// A letter captured before properties were recorded.
	legacy := deadletter.Parse(runLetter(3, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue}), nil, time.Now())
	legacy.Properties = nil
	stored, err := deadletter.Insert(context.Background(), b.pool, []deadletter.Letter{legacy})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, stored.FirstID)

	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)
	detail, err := b.as("bob").Show(context.Background(), req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantNotes := PropertyNotes{NotRecorded: 1, MadePersistent: 2, UserIDs: map[string]int{publisher: 1, "booking-svc": 1}}
	if !reflect.DeepEqual(detail.Properties, wantNotes) {
		t.Errorf("replay show's property notes %+v, want %+v", detail.Properties, wantNotes)
	}
	if _, err := b.runner(t).Run(context.Background(), req.ID); err != nil {
		t.Fatal(err)
	}
	byItem := map[int64]amqp.Delivery{}
	for _, d := range runDrain(t, b.conn, b.queue, 3, 5*time.Second) {
		byItem[d.Headers[HeaderReplayItem].(int64)] = d
	}
	d := byItem[ids[0]]
	got := [...]any{d.ContentType, d.ContentEncoding, d.CorrelationId, d.ReplyTo, d.Type, d.AppId, d.Priority, d.UserId,
		d.DeliveryMode, d.Expiration, d.MessageId, d.Timestamp.Unix()}
	want := [...]any{"application/json", "gzip", "corr-16", "booking.replies", "reservation.expire.v1", "booking-api@4.2.0",
		uint8(5), publisher, amqp.Persistent, "60000", "expire:r-1:v3", millis}
	if got != want {
		t.Errorf("properties of the full letter:\n got %v\nwant %v", got, want)
	}
	// The RabbitMQ driver moves what the run may not send as properties
	// into headers of its own.
	const originalUserID, originalReplyTo = "x-original-user-id", "x-original-reply-to"
	if _, ok := d.Headers[originalUserID]; ok {
		t.Errorf("a user_id the run may send was moved to a header: %v", d.Headers)
	}
	if at, ok := d.Headers[HeaderReplayedAt].(time.Time); !ok || time.Since(at) > time.Minute {
		t.Errorf("x-replayed-at = %#v, want the time of the run", d.Headers[HeaderReplayedAt])
	}
	if d := byItem[ids[1]]; d.UserId != "" || d.Headers[originalUserID] != "booking-svc" ||
		d.ReplyTo != "" || d.Headers[originalReplyTo] != "amq.rabbitmq.reply-to" {
		t.Errorf("foreign user_id and direct reply-to: properties %q %q, headers %v; want them in headers", d.UserId, d.ReplyTo, d.Headers)
	}
	if d := byItem[ids[2]]; d.ContentType != "application/json" || d.MessageId != "expire:r-3:v3" || !d.Timestamp.IsZero() ||
		d.DeliveryMode != amqp.Persistent || d.CorrelationId != "" {
		t.Errorf("legacy letter sent with %+v, want content type, message id and persistent only", d)
	}
}

func TestRunFreshKeyRewritesTheKeyOnly(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seed(t, runLetter(1, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue}),
		runLetter(2, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue, camel: true}))
	req := b.approved(t, NewRequest{FreshKey: true, ConfirmEligible: true, Canary: intPtr(0)}, ids)
	if _, err := b.runner(t).Run(ctx, req.ID); err != nil {
		t.Fatal(err)
	}
	got := runDrain(t, b.conn, b.queue, 2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("%d messages, want 2", len(got))
	}
	suffix := fmt.Sprintf(":replay:%d", req.ID)
	for _, d := range got {
		n := 1
		want := fmt.Sprintf(`{"reservation_id": "r-1", "expected_version":3,"hold_until":"2026-11-30T12:20:00Z","idempotency_key":"expire:r-1:v3%s","attempt":2}`, suffix)
		if d.Headers[HeaderReplayItem] == ids[1] {
			n = 2
			want = fmt.Sprintf(`{"reservationId":"r-2","expectedVersion":3,"holdUntil":"2026-11-30T12:20:00Z","idempotencyKey":"expire:r-2:v3%s"}`, suffix)
		}
		if string(d.Body) != want {
			t.Errorf("fresh-key body\n got %s\nwant %s", d.Body, want)
		}
		if d.MessageId != fmt.Sprintf("expire:r-%d:v3%s", n, suffix) {
			t.Errorf("fresh-key message id %q", d.MessageId)
		}
	}
}

func TestRunHoldsTheRateCeiling(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	const n, ratePerSec = 30, 20.0
	ids := b.seedN(t, 1, n)
	req := b.approved(t, NewRequest{Rate: ratePerSec, Canary: intPtr(0)}, ids)
	r := b.runner(t)
	var mu sync.Mutex
	var times []time.Time
	r.Broker = &timedBroker{Broker: r.Broker, mu: &mu, times: &times}
	start := time.Now()
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Confirmed != n {
		t.Fatalf("%+v %v", res, err)
	}
	elapsed := time.Since(start)
	burst := burstFor(ratePerSec)
	if min := time.Duration(float64(n-burst) / ratePerSec * float64(time.Second)); elapsed < min*95/100 {
		t.Errorf("%d items at %g/s took %s, faster than the ceiling allows (%s)", n, ratePerSec, elapsed, min)
	}
	// No one-second window holds more than rate + burst publishes.
	for i := range times {
		in := 0
		for j := i; j < len(times) && times[j].Sub(times[i]) < time.Second; j++ {
			in++
		}
		if in > int(ratePerSec)+burst {
			t.Fatalf("%d publishes within one second from publish %d, above %g + burst %d", in, i, ratePerSec, burst)
		}
	}
}

// timedBroker records when each publish happened.
type timedBroker struct {
	Broker
	mu    *sync.Mutex
	times *[]time.Time
}

// Encode is its broker's: the copies are what a real run sends.
func (b *timedBroker) Encode(c Copy) (Message, error) { return b.Broker.(Encoder).Encode(c) }

func (b *timedBroker) Publish(ctx context.Context, m Message) (Pending, error) {
	b.mu.Lock()
	*b.times = append(*b.times, time.Now())
	b.mu.Unlock()
	return b.Broker.Publish(ctx, m)
}

func TestRunUnroutableItemsFailAndHalt(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	msgs := make([]deadletter.Message, 15)
	for i := range msgs {
		msgs[i] = runLetter(i, runLetterOpts{exchange: b.exchange, key: "no.such.binding"})
	}
	ids := b.seed(t, msgs...)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 100, ViaExchange: true}, ids)
	res, err := b.runner(t).Run(ctx, req.ID)
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionFailureRatio {
		t.Fatalf("error = %v, want a halt on the failure ratio", err)
	}
	if res.Status != StatusHalted || res.Confirmed != 0 || res.Failed < 10 {
		t.Errorf("result %+v: want halted, nothing confirmed, at least 10 failed", res)
	}
	got := b.status(t, req.ID)
	if got.Status != StatusHalted || !strings.Contains(got.HaltReason, "failure-ratio") {
		t.Errorf("request %s (%q), want halted on failure-ratio", got.Status, got.HaltReason)
	}
	states := b.itemStates(t, req.ID)
	if states["publishing"] != 0 || states["confirmed"] != 0 || states["failed"]+states["pending"] != 15 {
		t.Errorf("item states %v: want only failed and pending", states)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'failed' AND last_error LIKE '%returned unroutable%'`, req.ID); n != states["failed"] {
		t.Errorf("%d failed items say they were returned unroutable, want %d", n, states["failed"])
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.halt' AND details->>'condition' = 'failure-ratio'`); n != 1 {
		t.Errorf("%d replay.halt audit rows, want 1", n)
	}
	// Halted needs a new approval.
	_, err = b.runner(t).Run(ctx, req.ID)
	wantRunRefusal(t, err, "approved-to-run")

	// The binding is fixed and an approver approves again: the run resumes
	// with the items still pending; the failed ones stay failed, and their
	// letters go back to the archive when the request completes.
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(b.queue, "no.such.binding", b.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	if _, err := b.as("carol").Approve(ctx, req.ID, ReviewOptions{Why: "binding fixed", CohortHash: req.CohortHash}); err != nil {
		t.Fatal(err)
	}
	res, err = b.runner(t).Run(ctx, req.ID)
	if err != nil || res.Status != StatusCompleted || res.Confirmed != states["pending"] || res.Failed != states["failed"] || len(res.FailedItems) != states["failed"] {
		t.Fatalf("run after the new approval: %+v, %v; want completed, %d confirmed, %d failed listed", res, err, states["pending"], states["failed"])
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'dead'`); n != states["failed"] {
		t.Errorf("%d letters dead again after completion, want the %d that failed", n, states["failed"])
	}
}

func TestRunMissingExchangeFailsItems(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seed(t, runLetter(1, runLetterOpts{exchange: b.exchange + ".gone", key: runKey}))
	req := b.approved(t, NewRequest{Canary: intPtr(0), ViaExchange: true}, ids)
	res, err := b.runner(t).Run(ctx, req.ID)
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionFailureRatio {
		t.Fatalf("error = %v, want a halt on the failure ratio", err)
	}
	if res.Failed != 1 || !strings.Contains(res.FailedItems[0].Reason, "does not exist") {
		t.Errorf("result %+v: want the item failed because its exchange does not exist", res)
	}
}

func TestRunHaltsOnTargetQueueDepth(t *testing.T) {
	t.Parallel()
	b := setupRun(t, "stop_queue_depth=3")
	ctx := context.Background()
	// The target queue already holds work.
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := ch.PublishWithContext(ctx, "", b.queue, false, false, amqp.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	_ = ch.Close()
	msgs := make([]deadletter.Message, 20)
	for i := range msgs {
		msgs[i] = runLetter(i, runLetterOpts{originQueue: b.queue})
	}
	ids := b.seed(t, msgs...)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 20}, ids)
	res, err := b.runner(t).Run(ctx, req.ID)
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionQueueDepth || !strings.Contains(halt.Reason, b.queue) {
		t.Fatalf("error = %v, want a halt on the depth of %s", err, b.queue)
	}
	if res.Confirmed >= 20 || b.status(t, req.ID).Status != StatusHalted {
		t.Errorf("result %+v: want halted before the end", res)
	}
	if states := b.itemStates(t, req.ID); states["publishing"] != 0 {
		t.Errorf("item states %v after a halt: nothing may stay publishing", states)
	}
	// The metrics count the halt by its condition, from the trail.
	tally, err := b.as("alice").Tally(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(tally.Halts, map[string]int64{ConditionQueueDepth: 1}) {
		t.Errorf("halts %v, want one on the queue depth", tally.Halts)
	}
	// The run's start row, written by the schema, gives durations in
	// seconds as every other JSON does.
	var window *float64
	if err := b.pool.QueryRow(ctx, `SELECT (details->'stop_conditions'->>'canary_window_seconds')::float8
		FROM expiryctl.audit_log WHERE action = 'replay.run.start'`).Scan(&window); err != nil {
		t.Fatal(err)
	}
	if window == nil || *window != 0.2 {
		t.Errorf("replay.run.start's canary_window_seconds = %v, want 0.2", window)
	}
}

func TestRunCanaryThatDiesAgainHalts(t *testing.T) {
	t.Parallel()
	b := setupRun(t, "canary_window=3s")
	ctx := context.Background()
	ids := b.seedN(t, 1, 10)
	req := b.approved(t, NewRequest{Canary: intPtr(2)}, ids)
	r := b.runner(t)

	// The worker dead-letters the replayed canary again; `dlq ingest`
	// captures it with x-replay-request, as it would in production.
	stop := make(chan struct{})
	redead := make(chan error, 1)
	go func() { redead <- b.dieAgain(stop) }()
	res, err := r.Run(ctx, req.ID)
	var halt *HaltError
	close(stop)
	if err := <-redead; err != nil {
		t.Fatal(err)
	}
	if !errors.As(err, &halt) || halt.Condition != ConditionRedeadRatio {
		t.Fatalf("error = %v, want a halt on re-dead letters", err)
	}
	if res.Published != 2 || res.Confirmed != 2 {
		t.Errorf("result %+v: want only the 2 canary items published", res)
	}
	if states := b.itemStates(t, req.ID); states["pending"] != 8 || states["confirmed"] != 2 {
		t.Errorf("item states %v, want 2 confirmed and 8 pending", states)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1 AND previous_id IS NOT NULL`, req.ID); n == 0 {
		t.Error("the re-dead letters are not linked to their first incarnation")
	}
}

// dieAgain plays a worker whose jobs still fail and the ingest that captures
// them: every replayed message in the bundle's queue comes back as a dead
// letter of its request, until stop is closed.
func (b *runBundle) dieAgain(stop <-chan struct{}) error { return b.dieAgainAfter(stop, 0) }

// dieAgainAfter is dieAgain with each letter captured delay after its
// replay was taken from the queue, as a worker's attempt and the capture
// take time.
func (b *runBundle) dieAgainAfter(stop <-chan struct{}, delay time.Duration) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		d, ok, err := ch.Get(b.queue, true)
		if err != nil {
			return err
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		time.Sleep(delay)
		again := deadletter.Message{Queue: "test.dlq", Body: d.Body, Headers: d.Headers, ContentType: d.ContentType, MessageID: d.MessageId}
		again.Headers["x-error-class"] = "db_timeout"
		again.Headers["x-last-error"] = "still down"
		letter := deadletter.Parse(again, nil, time.Now())
		err = pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := deadletter.Insert(context.Background(), tx, []deadletter.Letter{letter})
			return err
		})
		if err != nil {
			return err
		}
	}
}

// TestRunWatchesAfterItsLastPublish: every replayed job dies again, but
// only after its attempt, once the run published everything. The run
// does not say completed: it watches for the canary window after its last
// publish, sees them come back, and halts on the re-dead ratio.
func TestRunWatchesAfterItsLastPublish(t *testing.T) {
	t.Parallel()
	b := setupRun(t, "canary_window=3s")
	ctx := context.Background()
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 200}, b.seedN(t, 1, 10))
	r := b.runner(t)
	var watching []time.Duration
	r.Progress = func(p Progress) {
		if p.Phase == "watching" {
			watching = append(watching, p.CanaryLeft)
		}
	}
	stop := make(chan struct{})
	redead := make(chan error, 1)
	go func() { redead <- b.dieAgainAfter(stop, 100*time.Millisecond) }()
	res, err := r.Run(ctx, req.ID)
	close(stop)
	if err := <-redead; err != nil {
		t.Fatal(err)
	}
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionRedeadRatio || res.Status != StatusHalted || res.Confirmed != 10 {
		t.Fatalf("%+v, %v; want all 10 confirmed and a halt on the re-dead ratio", res, err)
	}
	if len(watching) == 0 {
		t.Error("the run never reported watching after its last publish")
	}
	d, err := b.as("bob").Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fates == nil || d.Fates.CameBack == 0 || d.Fates.CameBack > 10 {
		t.Errorf("replay show says %+v came back, want the re-dead letters the run halted on", d.Fates)
	}
}

func TestRunTwoRunnersOneRuns(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 8)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 10}, ids)
	// Two "hosts": separate pools and broker connections.
	other := &runBundle{pool: pgtest.Connect(t, b.db.URL), conn: b.conn}
	runners := []*Runner{b.runner(t), other.runner(t)}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	results := make([]RunResult, 2)
	for i, r := range runners {
		wg.Go(func() { results[i], errs[i] = r.Run(ctx, req.ID) })
	}
	wg.Wait()
	var ran, refused int
	for i, err := range errs {
		var refusal *Refusal
		switch {
		case err == nil && results[i].Status == StatusCompleted:
			ran++
		case errors.As(err, &refusal) && (refusal.Rule == "single-runner" || refusal.Rule == "terminal"):
			refused++
			if refusal.Rule == "single-runner" && !strings.Contains(refusal.Message, "another runner") {
				t.Errorf("single-runner refusal does not name the other runner: %s", refusal.Message)
			}
		default:
			t.Errorf("runner %d: %+v, %v", i, results[i], err)
		}
	}
	if ran != 1 || refused != 1 {
		t.Fatalf("%d runs completed and %d refused, want exactly one of each", ran, refused)
	}
	if got := runDrain(t, b.conn, b.queue, 8, 5*time.Second); len(got) != 8 {
		t.Errorf("%d messages published, want each of the 8 items once", len(got))
	}
}

func TestRunSecondRunnerIsRefusedWhileTheFirstRuns(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 10)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 10}, ids)
	first := b.runner(t)
	done := make(chan error, 1)
	go func() { _, err := first.Run(ctx, req.ID); done <- err }()
	// Wait until the first holds the request.
	deadline := time.Now().Add(5 * time.Second)
	for b.status(t, req.ID).Status != StatusRunning && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_, err := b.runner(t).Run(ctx, req.ID)
	wantRunRefusal(t, err, "single-runner")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunEligibilityQuerySkipsAndDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupRun(t, `eligibility_query=SELECT $1 NOT IN ('r-1', 'r-3'), 'reservation ' || $1 || ' is paid' WHERE $1 <> 'r-5'`)
	ctx := context.Background()
	ids := b.seedN(t, 1, 6)
	// And one letter with no target at all: no x-death, captured from a
	// queue not named as the topology names a dead-letter queue.
	lost := runLetter(7, runLetterOpts{})
	lost.Queue = "parking-lot"
	noTarget := b.seed(t, lost)
	all := append(ids, noTarget...)
	created, err := b.as("alice").Create(ctx, NewRequest{Kind: KindReplay, Selection: Selection{IDs: all}, Why: "x",
		ToExchange: "", ToRoutingKey: "", Canary: intPtr(0)})
	if err == nil {
		t.Fatalf("a letter with no target joined a request without --to-exchange: %+v", created)
	}
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)

	dry, err := b.runner(t).DryRun(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, it := range dry.Items {
		actions[it.ReservationID] = it.Action + ": " + it.Reason
	}
	want := map[string]string{
		"r-1": "skip: not eligible: reservation r-1 is paid", "r-2": "replay: ", "r-3": "skip: not eligible: reservation r-3 is paid",
		"r-4": "replay: ", "r-5": "skip: not eligible: the eligibility query returned no row", "r-6": "replay: ",
	}
	for k, v := range want {
		if actions[k] != v {
			t.Errorf("dry run %s: %q, want %q", k, actions[k], v)
		}
	}
	if states := b.itemStates(t, req.ID); states["pending"] != 6 {
		t.Errorf("the dry run changed item states: %v", states)
	}
	if got := runDrain(t, b.conn, b.queue, 0, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("the dry run published %d messages", len(got))
	}
	if b.status(t, req.ID).Status != StatusApproved {
		t.Error("the dry run changed the request's status")
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.dry_run'`); n != 1 {
		t.Errorf("%d replay.dry_run audit rows, want 1", n)
	}

	res, err := b.runner(t).Run(ctx, req.ID)
	if err != nil || res.Confirmed != 3 || res.Skipped != 3 {
		t.Fatalf("%+v %v: want 3 confirmed, 3 skipped", res, err)
	}
	if got := runDrain(t, b.conn, b.queue, 3, 5*time.Second); len(got) != 3 {
		t.Errorf("%d messages published, want the 3 eligible ones", len(got))
	}
	// Skipped letters are free again once the request completed.
	if n := b.count(t, `SELECT count(*) FROM expiryctl.dead_letters JOIN expiryctl.dead_letter_states ON dead_letter_id = id WHERE status = 'dead' AND reservation_id IN ('r-1', 'r-3', 'r-5')`); n != 3 {
		t.Errorf("%d skipped letters are dead again, want 3", n)
	}
}

func TestRunEligibilityQueryErrorHalts(t *testing.T) {
	t.Parallel()
	b := setupRun(t, `eligibility_query=SELECT eligible, why FROM no_such_table WHERE id = $1`)
	ctx := context.Background()
	ids := b.seedN(t, 1, 3)
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)
	_, err := b.runner(t).Run(ctx, req.ID)
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionEligibility {
		t.Fatalf("error = %v, want a halt on the eligibility query", err)
	}
	if states := b.itemStates(t, req.ID); states["pending"] != 3 {
		t.Errorf("item states %v, want all pending", states)
	}
}

func TestRunDiscardMarksLettersDiscarded(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 4)
	req := b.approved(t, NewRequest{Kind: KindDiscard}, ids)
	r := &Runner{Pool: b.pool, Actor: "oncall"} // no broker: a discard publishes nothing
	res, err := r.Run(ctx, req.ID)
	if err != nil || res.Status != StatusCompleted || res.Confirmed != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'discarded'`); n != 4 {
		t.Errorf("%d letters discarded, want 4", n)
	}
	if got := runDrain(t, b.conn, b.queue, 0, 200*time.Millisecond); len(got) != 0 {
		t.Errorf("a discard published %d messages", len(got))
	}
}

func TestRunResumesAfterACrash(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 10)
	req := b.approved(t, NewRequest{Canary: intPtr(0)}, ids)
	// A runner started, confirmed two items, marked three more publishing
	// (perhaps sent them) and died.
	for _, sql := range []string{
		`UPDATE expiryctl.replay_requests SET status = 'running' WHERE id = $1`,
		`UPDATE expiryctl.replay_items SET state = 'publishing' WHERE request_id = $1 AND ordinal < 2`,
		`UPDATE expiryctl.replay_items SET state = 'confirmed', confirmed_at = now(), attempts = 1 WHERE request_id = $1 AND ordinal < 2`,
		`UPDATE expiryctl.dead_letter_states SET status = 'replayed' WHERE dead_letter_id IN (SELECT dead_letter_id FROM expiryctl.replay_items WHERE request_id = $1 AND ordinal < 2)`,
		`UPDATE expiryctl.replay_items SET state = 'publishing' WHERE request_id = $1 AND ordinal BETWEEN 2 AND 4`,
	} {
		if _, err := b.pool.Exec(ctx, sql, req.ID); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.runner(t).Run(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Status != StatusCompleted || res.Confirmed != 10 || res.Published != 8 || res.Republished != 3 {
		t.Fatalf("result %+v: want resumed, completed, 10 confirmed, 8 published of which 3 again", res)
	}
	got := runDrain(t, b.conn, b.queue, 8, 5*time.Second)
	seen := map[int64]bool{}
	for _, d := range got {
		seen[d.Headers[HeaderReplayItem].(int64)] = true
	}
	for i, id := range ids {
		if (i >= 2) != seen[id] {
			t.Errorf("item %d (ordinal %d) published on resume: %v", id, i, seen[id])
		}
	}
	if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.start' AND (details->>'resume')::bool`); n != 1 {
		t.Errorf("%d resumed replay.run.start rows, want 1", n)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 40)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 20}, ids)
	// Cancelled once the first item is confirmed, not after a fixed delay:
	// on a loaded machine the run may take longer than any delay to start.
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			var confirmed int
			err := b.pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID).Scan(&confirmed)
			if err == nil && confirmed > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = b.as("carol").Cancel(ctx, req.ID, "wrong cohort")
	}()
	res, err := b.runner(t).Run(ctx, req.ID)
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionCancelled {
		t.Fatalf("error = %v, want a stop because the request was cancelled", err)
	}
	if res.Published >= 40 || res.Published == 0 {
		t.Errorf("published %d, want the run stopped part way", res.Published)
	}
	if got := b.status(t, req.ID); got.Status != StatusCancelled {
		t.Errorf("status %s, want cancelled", got.Status)
	}
	// Every letter the broker took is either confirmed or marked replayed.
	got := runDrain(t, b.conn, b.queue, res.Published, 5*time.Second)
	replayed := b.count(t, `SELECT count(*) FROM expiryctl.dead_letter_states WHERE status = 'replayed'`)
	if replayed != len(got) {
		t.Errorf("%d letters marked replayed, %d messages published", replayed, len(got))
	}
}

func TestRunInterruptedByLostBrokerResumes(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	ctx := context.Background()
	ids := b.seedN(t, 1, 60)
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 60}, ids)
	// A connection of its own, cut in the middle of the run.
	cut := amqptest.Dial(t)
	br, err := newAMQPBroker(cut)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Pool: b.pool, Broker: br, Actor: "oncall", checkEvery: 50 * time.Millisecond, Consumers: fixedHandler{}}
	go func() {
		time.Sleep(400 * time.Millisecond)
		_ = cut.Close()
	}()
	res, err := r.Run(ctx, req.ID)
	var interrupted *InterruptedError
	if !errors.As(err, &interrupted) {
		t.Fatalf("error = %v, want an interruption", err)
	}
	if got := b.status(t, req.ID); got.Status != StatusRunning {
		t.Fatalf("status %s after losing the broker, want running (resumable)", got.Status)
	}
	confirmedBefore := b.itemStates(t, req.ID)["confirmed"]
	if confirmedBefore != res.Confirmed || confirmedBefore >= 60 {
		t.Errorf("%d items confirmed in the database, the run says %d", confirmedBefore, res.Confirmed)
	}
	// Resume on a good connection.
	res2, err := b.runner(t).Run(ctx, req.ID)
	if err != nil || res2.Status != StatusCompleted || res2.Confirmed != 60 {
		t.Fatalf("resume: %+v %v", res2, err)
	}
	got := runDrain(t, b.conn, b.queue, 60, 10*time.Second)
	seen := map[int64]int{}
	for _, d := range got {
		seen[d.Headers[HeaderReplayItem].(int64)]++
	}
	if len(seen) != 60 {
		t.Errorf("%d distinct items reached the queue, want all 60", len(seen))
	}
	if confirmedBefore > len(got) {
		t.Errorf("%d items were confirmed before the cut but only %d messages exist", confirmedBefore, len(got))
	}
}

func TestRunRewritesIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body, want, key string
		ok              bool
	}{
		{`{"idempotency_key":"k1","a":1}`, `{"idempotency_key":"k1:replay:9","a":1}`, "k1:replay:9", true},
		{`{ "a" : [1, {"idempotency_key":"nested"}], "idempotencyKey" :  "k2" }`, `{ "a" : [1, {"idempotency_key":"nested"}], "idempotencyKey" :  "k2:replay:9" }`, "k2:replay:9", true},
		{`{"idempotency_key":42}`, `{"idempotency_key":"42:replay:9"}`, "42:replay:9", true},
		{`{"idempotency_key":"a\"b"}`, `{"idempotency_key":"a\"b:replay:9"}`, `a"b:replay:9`, true},
		{`{"reservation_id":"r"}`, "", "", false},
		{`[1,2]`, "", "", false},
		{`not json`, "", "", false},
		{`{"idempotency_key":""}`, "", "", false},
	} {
		got, key, err := rewriteIdempotencyKey([]byte(tt.body), 9)
		if (err == nil) != tt.ok || string(got) != tt.want || key != tt.key {
			t.Errorf("rewrite(%s) = %s, %q, %v; want %s, %q, ok=%v", tt.body, got, key, err, tt.want, tt.key, tt.ok)
		}
	}
}

func TestReplayHeadersStripFailureBookkeeping(t *testing.T) {
	t.Parallel()
	stored := deadletter.EncodeHeaders(amqp.Table{"x-death": []any{}, "x-first-death-queue": "q", "x-last-death-reason": "expired",
		"x-delivery-count": int64(3), "x-error-class": "e", "x-last-error": "e", "x-attempt-history": []any{},
		"x-attempt": int8(3), "x-retry-count": int16(2), "x-retries": "2", "retry-count": int64(2),
		"x-original-exchange": "ex", "custom": amqp.Decimal{Scale: 2, Value: 1234}, "x-replay-count": int64(4),
		"narrow": uint16(7)})
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	h, err := deadletter.DecodeHeaders(Stripped(stored))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range marks(Request{ID: 5, ReviewedBy: "bob"}, "alice", 77, 4, at.Add(300*time.Millisecond)) {
		h[m.Name] = m.Value
	}
	want := map[string]any{"x-original-exchange": "ex", "custom": amqp.Decimal{Scale: 2, Value: 1234}, "narrow": uint16(7),
		HeaderReplayRequest: int64(5), HeaderReplayCount: int64(5), HeaderReplayedBy: "alice", HeaderApprovedBy: "bob", HeaderReplayItem: int64(77),
		HeaderReplayedAt: at}
	if len(h) != len(want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %#v, want %#v", k, h[k], v)
		}
	}
}

func TestRunDropTopLevelMatchesAFullDecode(t *testing.T) {
	t.Parallel()
	tables := []amqp.Table{
		{},
		{"x-death": []any{amqp.Table{"queue": "q}\"", "time": time.Unix(1, 0)}}, "k": "v"},
		{"a\"b": "}{][", "x-error-class": "e", "$dollar": int64(1), "x-first-death-queue": "q", "nested": amqp.Table{"x-death": "kept, not top level"}},
		{"x-last-error": "quote \" backslash \\ brace }", "list": []any{int64(1), "two", []any{}}, "f": 1.5, "nil": nil, "b": true},
		{"bad\x00key": "v", "x-attempt-history": []any{amqp.Table{"at": time.Unix(2, 0)}}, "bytes": []byte("}]")},
	}
	for i, tab := range tables {
		stored := deadletter.EncodeHeaders(tab)
		full, err := deadletter.DecodeHeaders(stored)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		for k, v := range full {
			if !stripped(k) {
				want[k] = v
			}
		}
		got, err := deadletter.DecodeHeaders(dropTopLevel(stored, stripped))
		if err != nil {
			t.Fatalf("table %d: %v (from %s)", i, err, dropTopLevel(stored, stripped))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("table %d: got %v, want %v", i, got, want)
		}
	}
	for _, broken := range []string{``, `[]`, `{"a":`, `{"a" 1}`, `{"a":"x}`, `null`} {
		if got := string(dropTopLevel([]byte(broken), stripped)); got != broken {
			t.Errorf("dropTopLevel(%q) = %q, want the input back", broken, got)
		}
	}
}

// TestOneLetterRunWaitsOnlyForItsOutcome: a canary of the whole cohort
// gates nothing, so a one-letter run has no canary phase; it watches for
// the letter coming back until its reservation reaches its terminal state,
// not for the rest of the window, when an outcome query can say so, and
// for the whole window when none can.
func TestOneLetterRunWaitsOnlyForItsOutcome(t *testing.T) {
	t.Parallel()
	const window = 30 * time.Second
	for _, tc := range []struct {
		name    string
		policy  []string
		atLeast time.Duration
		within  time.Duration
	}{
		{"an outcome query sees it done", []string{"canary_window=" + window.String(), "outcome_query=SELECT now(), false", "outcome_window=1m"},
			0, window / 2},
		{"no outcome query", []string{"canary_window=2s"}, 2 * time.Second, window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRun(t, tc.policy...)
			req := b.approved(t, NewRequest{}, b.seedN(t, 1, 1))
			if req.Canary != 1 || req.Items != 1 {
				t.Fatalf("request canary %d of %d items, want the default canary of 1 for a cohort of 1", req.Canary, req.Items)
			}
			r := b.runner(t)
			r.outcomeEvery = 100 * time.Millisecond
			start := time.Now()
			res, err := r.Run(context.Background(), req.ID)
			took := time.Since(start)
			if err != nil || res.Status != StatusCompleted || res.Confirmed != 1 {
				t.Fatalf("run: %+v, %v; want it completed with its one item confirmed", res, err)
			}
			if took < tc.atLeast || took > tc.within {
				t.Errorf("the run took %s, want between %s and %s", took.Round(time.Millisecond), tc.atLeast, tc.within)
			}
			if n := b.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action LIKE 'replay.canary.%' AND target = $1`, requestTarget(req.ID)); n != 0 {
				t.Errorf("%d canary audit rows, want none: the cohort was its own canary", n)
			}
		})
	}
}
