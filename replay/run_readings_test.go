package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// progressLog keeps every progress a run reports.
type progressLog struct {
	mu  sync.Mutex
	all []Progress
}

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, p)
}

func (l *progressLog) last() Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[len(l.all)-1]
}

// TestProgressReadsTheQueueDepthThatHalted: the progress of a run halted on
// the target queue's depth says that depth, that queue, that condition and
// the time it ran: what a display beside the halt shows agrees with it.
func TestProgressReadsTheQueueDepthThatHalted(t *testing.T) {
	t.Parallel()
	b := setupRun(t, "stop_queue_depth=3")
	ctx := context.Background()
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
	req := b.approved(t, NewRequest{Canary: intPtr(0), Rate: 20}, b.seed(t, msgs...))
	var log progressLog
	r := b.runner(t)
	r.Progress = log.add
	_, err = r.Run(ctx, req.ID)
	if !errors.As(err, new(*HaltError)) {
		t.Fatalf("error = %v, want a halt", err)
	}
	s := log.last().Stops
	if !s.Checked || s.QueueDepth <= 3 || s.DepthQueue != b.queue || s.Halted != ConditionQueueDepth {
		t.Errorf("final readings %+v: want the depth above 3 of %s and the halt on queue-depth", s, b.queue)
	}
	if s.Canary != "" {
		t.Errorf("canary %q for a request without one", s.Canary)
	}
	if log.last().Elapsed <= 0 {
		t.Errorf("elapsed %s at the end of a run", log.last().Elapsed)
	}
	if first := log.all[0].Stops; first.Checked {
		t.Errorf("the first progress says checked before any check ran: %+v", first)
	}
}

// TestProgressReadsTheCanaryThatDiedAgain: a canary whose letters die again
// ends with readings that say so: the re-dead count and ratio over this
// run's confirms, the canary failed, the halt on redead-ratio.
func TestProgressReadsTheCanaryThatDiedAgain(t *testing.T) {
	t.Parallel()
	b := setupRun(t, "canary_window=3s")
	ids := b.seedN(t, 1, 10)
	req := b.approved(t, NewRequest{Canary: intPtr(2)}, ids)
	var log progressLog
	r := b.runner(t)
	r.Progress = log.add
	stop := make(chan struct{})
	redead := make(chan error, 1)
	go func() { redead <- b.dieAgain(stop) }()
	_, err := r.Run(context.Background(), req.ID)
	close(stop)
	if err := <-redead; err != nil {
		t.Fatal(err)
	}
	if !errors.As(err, new(*HaltError)) {
		t.Fatalf("error = %v, want a halt", err)
	}
	s := log.last().Stops
	if s.Redead < 1 || s.ConfirmedRun != 2 || s.RedeadRatio != float64(s.Redead)/2 || s.Halted != ConditionRedeadRatio {
		t.Errorf("final readings %+v: want the re-dead letters over 2 confirms and the halt on redead-ratio", s)
	}
	if s.Canary != CanaryFailed {
		t.Errorf("canary %q after its letters died again, want failed", s.Canary)
	}
	var sawWaiting bool
	for _, p := range log.all {
		sawWaiting = sawWaiting || p.Stops.Canary == CanaryWaiting
	}
	if !sawWaiting {
		t.Error("no progress said the canary was waiting out its window")
	}
}

// TestProgressCanaryPassesAndCompletes: a run whose canary passes reports
// it passed to the end, with its failure ratio over this run's publishes.
func TestProgressCanaryPassesAndCompletes(t *testing.T) {
	t.Parallel()
	b := setupRun(t)
	req := b.approved(t, NewRequest{Canary: intPtr(2)}, b.seedN(t, 1, 6))
	var log progressLog
	r := b.runner(t)
	r.Progress = log.add
	res, err := r.Run(context.Background(), req.ID)
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("run: %+v, %v", res, err)
	}
	s := log.last().Stops
	if s.Canary != CanaryPassed || s.Halted != "" || s.Attempted != 6 || s.FailureRatio != 0 || !s.Checked {
		t.Errorf("final readings %+v: want the canary passed, 6 attempted, none failed, checked", s)
	}
}
