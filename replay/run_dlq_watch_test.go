package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
)

// watchBundle is a runBundle whose letters were captured from a real
// dead-letter queue, dlq, and an operator, olga, who is in no other group:
// her run may capture dlq only because it holds the request's lease.
type watchBundle struct {
	*runBundle
	dlq  string
	olga *Service
	ids  []int64
}

func setupWatch(t *testing.T, letters int, policy ...string) *watchBundle {
	t.Helper()
	b := setupRun(t, append([]string{"canary_window=2s"}, policy...)...)
	w := &watchBundle{runBundle: b, dlq: b.queue + ".dlq"}
	amqptest.DeleteOnCleanup(t, []string{w.dlq}, nil)
	ch, err := b.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(w.dlq, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	msgs := make([]deadletter.Message, letters)
	for i := range msgs {
		msgs[i] = runLetter(i+1, runLetterOpts{exchange: b.exchange, key: runKey, failedIn: b.queue})
		msgs[i].Queue = w.dlq
	}
	w.ids = b.seed(t, msgs...)
	w.olga = &Service{Pool: b.db.Login(t, "olga", "expiryctl_operator").Pool, Actor: "olga"}
	return w
}

// request has olga request a replay of every letter, saying nothing of
// watching, and bob approve it.
func (w *watchBundle) request(t *testing.T, nr NewRequest) Request {
	t.Helper()
	nr.Kind, nr.Selection, nr.Why = KindReplay, Selection{IDs: w.ids}, "INC-40"
	created, err := w.olga.Create(context.Background(), nr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.as("bob").Approve(context.Background(), created.Request.ID, ReviewOptions{Why: "ok", CohortHash: created.Request.CohortHash})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// runner is olga's runner, capturing with the RabbitMQ adapter's consumer.
func (w *watchBundle) runner(t *testing.T) *Runner {
	r := w.runBundle.runner(t)
	r.Pool, r.Actor = w.olga.Pool, "olga"
	r.OpenDLQ = func(_ context.Context, queue string) (deadletter.ClosableSource, error) {
		return newDLQSource(w.conn, queue)
	}
	return r
}

// failEveryJob plays a worker whose every attempt fails for good: it takes
// each replayed job from the work queue and dead-letters it to the DLQ, as
// the reference worker does, headers and all, until stop. Nothing captures
// the DLQ but the run.
func (w *watchBundle) failEveryJob(stop <-chan struct{}) error {
	ch, err := w.conn.Channel()
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
		d, ok, err := ch.Get(w.queue, false)
		if err != nil {
			return err
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		h := d.Headers
		h["x-error-class"] = "not_found"
		h["x-last-error"] = "reservation no longer exists"
		if err := ch.PublishWithContext(context.Background(), "", w.dlq, false, false, amqp.Publishing{
			Headers: h, Body: d.Body, ContentType: d.ContentType, MessageId: d.MessageId, DeliveryMode: amqp.Persistent,
		}); err != nil {
			return err
		}
		if err := d.Ack(false); err != nil {
			return err
		}
	}
}

// runHaltsOnRedead runs req while failEveryJob dead-letters every job it
// publishes, and wants it halted on the re-dead ratio.
func (w *watchBundle) runHaltsOnRedead(t *testing.T, req Request) (RunResult, *HaltError) {
	t.Helper()
	stop := make(chan struct{})
	worker := make(chan error, 1)
	go func() { worker <- w.failEveryJob(stop) }()
	res, err := w.runner(t).Run(context.Background(), req.ID)
	close(stop)
	if err := <-worker; err != nil {
		t.Fatal(err)
	}
	var halt *HaltError
	if !errors.As(err, &halt) || halt.Condition != ConditionRedeadRatio {
		t.Fatalf("run = %+v, %v; want halted on the re-dead ratio", res, err)
	}
	return res, halt
}

// TestRunSeesItsJobsDieAgainWithoutFollow is the incident of issue 32:
// 40 letters whose reservations no longer exist are replayed, every job
// dies again, and no `dlq ingest --follow` runs. The run captures the DLQ
// itself and halts on the re-dead ratio instead of saying completed; the
// letters that came back are in the archive, linked to the request, and
// the DLQ is empty.
func TestRunSeesItsJobsDieAgainWithoutFollow(t *testing.T) {
	t.Parallel()
	w := setupWatch(t, 40)
	ctx := context.Background()
	req := w.request(t, NewRequest{Canary: intPtr(4), Rate: 200})
	if dry, err := w.runner(t).DryRun(ctx, req.ID); err != nil || len(dry.DeadLetterQueues) != 1 || dry.DeadLetterQueues[0].By != "run" {
		t.Fatalf("dry run: %+v, %v; want %s captured by the run", dry.DeadLetterQueues, err, w.dlq)
	}
	res, _ := w.runHaltsOnRedead(t, req)
	if res.Status != StatusHalted {
		t.Errorf("status %s, want halted", res.Status)
	}
	back := w.count(t, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID)
	if back == 0 || back > res.Confirmed {
		t.Errorf("%d letters of the request captured again, want between 1 and the %d confirmed", back, res.Confirmed)
	}
	if n := w.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest.batch' AND actor = 'olga'
		AND (details->>'by_run')::boolean`); n == 0 {
		t.Error("no capture batch of olga's run says by_run")
	}
	// The capture ended with the run, saying so on the trail as an ingest
	// does: what it received, stored and skipped.
	if n := w.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest' AND actor = 'olga'
		AND target = $1 AND outcome = 'ok' AND (details->>'stored')::int > 0`, "queue:"+w.dlq); n != 1 {
		t.Errorf("%d summaries of the run's capture of %s on the trail, want 1", n, w.dlq)
	}
	// What the run captured was acknowledged only after its commit, and
	// the run committed all it took before it ended.
	ch, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(w.dlq, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the run: %d captured, %d left in %s, %d confirmed", back, q.Messages, w.dlq, res.Confirmed)
	if got := w.count(t, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID); got+q.Messages < res.Confirmed {
		t.Errorf("%d captured and %d left in %s, fewer than the %d jobs that died again", got, q.Messages, w.dlq, res.Confirmed)
	}
	d, err := w.as("bob").Show(ctx, req.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fates == nil || d.Fates.CameBack != back {
		t.Errorf("replay show says %+v came back, the archive %d", d.Fates, back)
	}
}

// TestRunRefusesWhatItCannotWatch: a request whose DLQ is gone does not
// start (dlq-unwatched) and keeps its approval, whether the runner cannot
// open the queue or cannot capture at all; the same letters under a
// request that says --unwatched run, and the approver saw the reason.
func TestRunRefusesWhatItCannotWatch(t *testing.T) {
	t.Parallel()
	w := setupWatch(t, 3)
	ctx := context.Background()
	ch, err := w.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(w.dlq, false, false, false); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	req := w.request(t, NewRequest{Canary: intPtr(0)})
	// The dry run says so before anyone runs it, taking nothing.
	dry, err := w.runner(t).DryRun(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.DeadLetterQueues) != 1 || dry.DeadLetterQueues[0].Queue != w.dlq || dry.DeadLetterQueues[0].By != "" ||
		!strings.Contains(dry.DeadLetterQueues[0].Unwatched, "does not exist") {
		t.Errorf("dry run's dead-letter queues %+v, want %s unwatched: it does not exist", dry.DeadLetterQueues, w.dlq)
	}
	noCapture := w.runner(t)
	noCapture.OpenDLQ = nil
	for name, r := range map[string]*Runner{"a runner whose DLQ is gone": w.runner(t), "a runner that cannot capture": noCapture} {
		_, err := r.Run(ctx, req.ID)
		var refusal *Refusal
		if !errors.As(err, &refusal) || refusal.Rule != "dlq-unwatched" {
			t.Fatalf("%s: %v, want refused by dlq-unwatched", name, err)
		}
	}
	if got := w.status(t, req.ID); got.Status != StatusApproved || got.ApprovalSpent {
		t.Fatalf("after the refusals the request is %s (spent %v), want approved", got.Status, got.ApprovalSpent)
	}
	if _, err := w.olga.Cancel(ctx, req.ID, "the DLQ is gone"); err != nil {
		t.Fatal(err)
	}
	loose := w.request(t, NewRequest{Canary: intPtr(0), UnwatchedWhy: "the DLQ was moved to the other site, which captures it"})
	d, err := w.as("carol").Show(ctx, loose.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.UnwatchedWhy == "" {
		t.Error("replay show does not carry the --unwatched reason")
	}
	res, err := w.runner(t).Run(ctx, loose.ID)
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("the --unwatched request: %+v, %v; want completed", res, err)
	}
	if n := w.count(t, fmt.Sprintf(`SELECT count(*) FROM expiryctl.audit_log WHERE action = 'replay.run.start'
		AND target = 'replay_request:%d' AND details->>'unwatched_why' <> ''`, loose.ID)); n != 1 {
		t.Errorf("%d start rows of the --unwatched run name its reason, want 1", n)
	}
}

// interruptWhenConfirmed runs req until the broker confirmed every item,
// then stops the runner as a kill would in the watch window after its
// last publish: the request stays running, to be resumed.
func (w *watchBundle) interruptWhenConfirmed(t *testing.T, req Request) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if w.count(t, `SELECT count(*) FROM expiryctl.replay_items WHERE request_id = $1 AND state = 'confirmed'`, req.ID) == req.Items {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if res, err := w.runner(t).Run(ctx, req.ID); err == nil {
		t.Fatalf("the run ended on its own (%+v) before it was stopped in its watch window", res)
	}
	if got := w.status(t, req.ID); got.Status != StatusRunning {
		t.Fatalf("after the stop the request is %s, want running", got.Status)
	}
}

// TestRunResumedOwesItsWatchWindow: a run stopped in the watch window
// after its last publish, before any job died again, is resumed with
// nothing left to publish. While the window is open the resumed run
// still owes it: the dry run lists the DLQ of the confirmed items, and
// the run captures it and halts on the re-dead ratio of every item the
// run confirmed, the stopped leg's included. Once the window closed, a
// resumed run owes nothing and completes, capturing no queue.
func TestRunResumedOwesItsWatchWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("window open", func(t *testing.T) {
		t.Parallel()
		w := setupWatch(t, 6, "canary_window=30s")
		req := w.request(t, NewRequest{Canary: intPtr(0), Rate: 200})
		w.interruptWhenConfirmed(t, req)
		dry, err := w.runner(t).DryRun(ctx, req.ID)
		if err != nil || len(dry.DeadLetterQueues) != 1 || dry.DeadLetterQueues[0].Queue != w.dlq {
			t.Fatalf("dry run of the resumed run: %+v, %v; want %s, the confirmed items' DLQ", dry.DeadLetterQueues, err, w.dlq)
		}
		res, halt := w.runHaltsOnRedead(t, req)
		if !res.Resumed || res.Published != 0 {
			t.Errorf("resumed run %+v: want a resume that published nothing", res)
		}
		if want := fmt.Sprintf(" of %d replayed letters died again", req.Items); !strings.Contains(halt.Reason, want) {
			t.Errorf("resumed run halted with %q, want the ratio over the %d items the stopped leg confirmed", halt.Reason, req.Items)
		}
	})
	t.Run("window closed", func(t *testing.T) {
		t.Parallel()
		w := setupWatch(t, 6, "canary_window=1s")
		req := w.request(t, NewRequest{Canary: intPtr(0), Rate: 200})
		w.interruptWhenConfirmed(t, req)
		time.Sleep(1500 * time.Millisecond)
		dry, err := w.runner(t).DryRun(ctx, req.ID)
		if err != nil || len(dry.DeadLetterQueues) != 0 {
			t.Fatalf("dry run after the window: %+v, %v; want no queue owed a watch", dry.DeadLetterQueues, err)
		}
		before := w.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest' AND actor = 'olga'`)
		res, err := w.runner(t).Run(ctx, req.ID)
		if err != nil || res.Status != StatusCompleted {
			t.Fatalf("resumed after its window: %+v, %v; want completed", res, err)
		}
		if after := w.count(t, `SELECT count(*) FROM expiryctl.audit_log WHERE action = 'dlq.ingest' AND actor = 'olga'`); after != before {
			t.Errorf("the resumed run captured a queue (%d captures before, %d after) though it owed no watch", before, after)
		}
	})
}
