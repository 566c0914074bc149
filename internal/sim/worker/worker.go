package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Config tunes Run. The zero value is the production configuration; tests
// inject the clock, the random source and a short backoff.
type Config struct {
	// MaxAttempts is the attempt budget: a job failing transiently this many
	// times is dead-lettered (default 7, the seed's). The count comes from the
	// x-attempt-history header, so it survives the trip through the retry
	// queues and a worker restart.
	MaxAttempts int
	// Backoff sets the delay before each retry (default DefaultBackoff).
	// Delays beyond the longest retry tier are clamped to it; the default
	// tiers reach the default cap.
	Backoff Backoff
	// Concurrency is the number of jobs processed at once (default 4).
	Concurrency int
	// Prefetch is the number of unacked deliveries the broker hands over
	// ahead of processing (default 4×Concurrency).
	Prefetch int
	// JobTimeout bounds one ExpireOnce call (default 15 s); running out is a
	// transient db_timeout.
	JobTimeout time.Duration
	// ConfirmTimeout bounds the wait for the broker's confirm of a retry or
	// dead-letter copy (default 10 s).
	ConfirmTimeout time.Duration
	// RequeueDelay is the pause before a delivery whose copy could not be
	// published is handed back to the queue (default 1 s). Without it, a
	// broken dead-letter route would spin the same delivery at full speed.
	RequeueDelay time.Duration
	// Now is the clock for attempt history entries and dead-letter
	// timestamps (default time.Now).
	Now func() time.Time
	// Rand draws the backoff jitter in [0, 1); it is called from several
	// goroutines (default math/rand/v2.Float64).
	Rand func() float64
	// ConsumerTag names the consumer in the management UI (default
	// "expiryctl-worker-<random>").
	ConsumerTag string
	// HandlerVersion is this worker's version, written as x-handler-version
	// on every letter it dead-letters (default DefaultHandlerVersion). The
	// connection should advertise the same (ConnectionProperties), which
	// the caller does when it dials: a replay checks the two against each
	// other.
	HandlerVersion string
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 7
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 4 * c.Concurrency
	}
	if c.JobTimeout <= 0 {
		c.JobTimeout = 15 * time.Second
	}
	if c.ConfirmTimeout <= 0 {
		c.ConfirmTimeout = 10 * time.Second
	}
	if c.RequeueDelay <= 0 {
		c.RequeueDelay = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = mathrand.Float64
	}
	if c.HandlerVersion == "" {
		c.HandlerVersion = DefaultHandlerVersion
	}
	if c.ConsumerTag == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.ConsumerTag = "expiryctl-worker-" + hex.EncodeToString(b)
	}
	return c
}

// Deps is what Run works with.
type Deps struct {
	// Pool is the database ExpireOnce runs in. Unused when Expire is set.
	Pool *pgxpool.Pool
	// AMQP is the broker connection; Run opens its own channels on it and
	// closes them, never the connection.
	AMQP *amqp.Connection
	// Topology names the queues; Run does not declare it (DeclareTopology
	// does), so a missing queue fails Run at once instead of being created
	// with arguments nobody chose.
	Topology Topology
	// Config tunes retries and concurrency.
	Config Config
	// Expire replaces ExpireOnce, for simulating a failing database.
	Expire ExpireFunc
	// OnEvent, when set, is told what happened to every delivery. It is
	// called from the processing goroutines, after the ack or reject, and
	// must not block for long.
	OnEvent func(Event)
}

// Action is what the worker did with a delivery.
type Action string

// The actions reported in Event.
const (
	// ActionAcked means the job succeeded (its outcome says how) and the delivery
	// was acked after the commit.
	ActionAcked Action = "acked"
	// ActionRetried means the job failed transiently; a copy waits in a retry
	// queue and the delivery was acked after the broker confirmed the copy.
	ActionRetried Action = "retried"
	// ActionDeadLettered means the job failed permanently or ran out of attempts;
	// a copy went to the dead-letter exchange and the delivery was acked after
	// the broker confirmed it.
	ActionDeadLettered Action = "dead-lettered"
	// ActionRejected means the body could not be decoded; the delivery was
	// rejected without requeue, so RabbitMQ dead-lettered it.
	ActionRejected Action = "rejected"
	// ActionReturned means the copy could not be published or the ack failed; the
	// delivery goes back to the queue and will be processed again.
	ActionReturned Action = "returned"
	// ActionDeferred means the job may not run yet: its not_before, or its
	// reservation's deadline, is ahead. A copy waits in a retry queue until
	// then (hop by hop, when further than the longest tier) and the
	// delivery was acked after the broker confirmed it. It spends no
	// attempt.
	ActionDeferred Action = "deferred"
)

// Event reports the handling of one delivery.
type Event struct {
	// At is when the handling finished, by Config.Now.
	At time.Time
	// MessageID is the delivery's AMQP message id.
	MessageID string
	// ReservationID is empty when the body could not be decoded.
	ReservationID string
	// Attempt is this delivery's attempt number, 1 for the first.
	Attempt int
	// Action is what became of the delivery.
	Action Action
	// Outcome is set for ActionAcked.
	Outcome Outcome
	// ErrorClass and Err say why the job failed, for every other action.
	ErrorClass string
	Err        error
	// Delay is the wait before the retry, for ActionRetried and
	// ActionDeferred.
	Delay time.Duration
	// Queue is where the copy went: the retry queue or the dead-letter
	// exchange.
	Queue string
}

// Terminal reports whether the delivery is done with: processed, or handed
// to the dead-letter queue by the worker or by the broker.
func (e Event) Terminal() bool {
	return e.Action == ActionAcked || e.Action == ActionDeadLettered || e.Action == ActionRejected
}

// Run consumes jobs from deps.Topology.Queue until ctx is cancelled, then
// stops consuming, lets the jobs in hand finish (each within JobTimeout) and
// returns nil. Deliveries received but not started go back to the queue when
// Run closes its channel. Run returns an error when the broker closes the
// consuming channel or connection; the caller decides whether to start again.
func Run(ctx context.Context, deps Deps) error {
	if deps.AMQP == nil {
		return errors.New("worker: no AMQP connection")
	}
	if err := deps.Topology.validate(); err != nil {
		return err
	}
	cfg := deps.Config.withDefaults()
	expire := deps.Expire
	if expire == nil {
		if deps.Pool == nil {
			return errors.New("worker: neither a database pool nor an Expire function")
		}
		expire = func(ctx context.Context, job Job) (Outcome, error) { return ExpireOnce(ctx, deps.Pool, job) }
	}

	ch, err := deps.AMQP.Channel()
	if err != nil {
		return fmt.Errorf("worker: open channel: %w", err)
	}
	defer ch.Close()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	cancelled := ch.NotifyCancel(make(chan string, 1))
	if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("worker: set prefetch: %w", err)
	}
	deliveries, err := ch.Consume(deps.Topology.Queue, cfg.ConsumerTag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("worker: consume from queue %s: %w", deps.Topology.Queue, err)
	}

	var wg sync.WaitGroup
	for range cfg.Concurrency {
		p := &processor{cfg: cfg, topo: deps.Topology, expire: expire, onEvent: deps.OnEvent,
			pub: &publisher{conn: deps.AMQP}}
		wg.Go(func() {
			defer p.pub.close()
			for {
				select {
				case <-ctx.Done():
					return
				case d, ok := <-deliveries:
					if !ok {
						return
					}
					p.handle(ctx, &d)
				}
			}
		})
	}
	// The deliveries channel also closes when the broker cancels the
	// consumer (its queue was deleted) while the channel itself stays open;
	// Run must not sit there waiting for a context that nobody cancels.
	idle := make(chan struct{})
	go func() {
		wg.Wait()
		close(idle)
	}()

	var runErr error
	select {
	case <-ctx.Done():
		_ = ch.Cancel(cfg.ConsumerTag, false)
	case amqpErr := <-closed:
		if amqpErr != nil {
			runErr = fmt.Errorf("worker: the broker closed the consumer channel: %w", amqpErr)
		} else {
			runErr = errors.New("worker: the consumer channel closed")
		}
	case <-cancelled:
		runErr = fmt.Errorf("worker: the broker cancelled the consumer on queue %s (was the queue deleted?)", deps.Topology.Queue)
	case <-idle:
		if ctx.Err() == nil {
			runErr = fmt.Errorf("worker: stopped receiving deliveries from queue %s", deps.Topology.Queue)
		}
	}
	<-idle
	return runErr
}

// processor handles deliveries one at a time with its own confirm-mode
// publisher, so that a basic.return can be matched to the publish it answers.
type processor struct {
	cfg     Config
	topo    Topology
	expire  ExpireFunc
	onEvent func(Event)
	pub     *publisher
}

func (p *processor) handle(ctx context.Context, d *amqp.Delivery) {
	// A job already started finishes even when Run is stopping: abandoning
	// it mid-transaction is safe but wastes the work, and the commit would be
	// followed by no ack, so the job would run again as a Duplicate.
	work := context.WithoutCancel(ctx)
	prior := priorHistory(d.Headers)
	ev := Event{MessageID: d.MessageId, Attempt: len(prior) + 1}
	defer func() {
		if p.onEvent != nil {
			ev.At = p.cfg.Now()
			p.onEvent(ev)
		}
	}()

	job, err := DecodeJob(d.Body)
	if err == nil {
		ev.ReservationID = job.ReservationID
		if job.NotBefore != nil {
			if wait := job.NotBefore.Sub(p.cfg.Now()); wait > 0 {
				p.deferFor(work, d, &ev, wait)
				return
			}
		}
		jobCtx, cancel := context.WithTimeout(work, p.cfg.JobTimeout)
		var outcome Outcome
		outcome, err = p.expire(jobCtx, job)
		cancel()
		if err == nil {
			ev.Action, ev.Outcome = ActionAcked, outcome
			p.ack(d, &ev)
			return
		}
		var notDue *NotDueError
		if errors.As(err, &notDue) {
			p.deferFor(work, d, &ev, notDue.Wait)
			return
		}
	}
	jobErr := classify(err)
	ev.ErrorClass, ev.Err = jobErr.Class, jobErr

	if jobErr.Class == ClassMalformed {
		// Only a reject makes RabbitMQ write x-death reason "rejected", the
		// contract's signal for a payload nobody could read.
		ev.Action = ActionRejected
		if err := d.Reject(false); err != nil {
			ev.Action, ev.Err = ActionReturned, fmt.Errorf("reject: %w", err)
		}
		return
	}

	now := p.cfg.Now()
	history := append(prior, historyEntry(now, jobErr))
	exchange, routingKey := origin(d)
	headers := cloneHeaders(d.Headers)
	headers[HeaderAttemptHistory] = history
	headers[HeaderOriginalExchange] = exchange
	headers[HeaderOriginalRoutingKey] = routingKey

	var pubErr error
	if jobErr.Permanent || len(history) >= p.cfg.MaxAttempts {
		headers[HeaderErrorClass] = jobErr.Class
		headers[HeaderLastError] = errorText(jobErr)
		headers[HeaderHandlerVersion] = p.cfg.HandlerVersion
		if jobErr.RetryAfter > 0 {
			// Whole seconds, rounded up: no sooner than asked.
			headers[HeaderRetryAfter] = int64((jobErr.RetryAfter + time.Second - 1) / time.Second)
		}
		ev.Action, ev.Queue = ActionDeadLettered, p.topo.DeadLetterExchange
		pubErr = p.pub.publish(work, p.cfg.ConfirmTimeout, p.topo.DeadLetterExchange, routingKey, copyOf(d, headers, now))
	} else {
		tier, delay := p.topo.tierFor(max(p.cfg.Backoff.Delay(len(history), p.cfg.Rand()), jobErr.RetryAfter))
		msg := copyOf(d, headers, d.Timestamp)
		msg.Expiration = strconv.FormatInt(delay.Milliseconds(), 10)
		ev.Action, ev.Queue, ev.Delay = ActionRetried, p.topo.RetryQueue(tier), delay
		pubErr = p.pub.publish(work, p.cfg.ConfirmTimeout, "", ev.Queue, msg)
	}
	if pubErr != nil {
		ev.Action, ev.Err = ActionReturned, pubErr
		p.giveBack(ctx, d)
		return
	}
	p.ack(d, &ev)
}

// deferFor puts the job back to come again after wait, through the retry
// queue that holds it (the longest, when wait is longer: the job then comes
// back early and waits again), with its headers as they came: a deferral is
// not a failure and adds nothing to the attempt history.
func (p *processor) deferFor(ctx context.Context, d *amqp.Delivery, ev *Event, wait time.Duration) {
	tier, delay := p.topo.tierFor(max(wait, time.Millisecond))
	msg := copyOf(d, cloneHeaders(d.Headers), d.Timestamp)
	msg.Expiration = strconv.FormatInt(delay.Milliseconds(), 10)
	ev.Action, ev.Queue, ev.Delay = ActionDeferred, p.topo.RetryQueue(tier), delay
	if err := p.pub.publish(ctx, p.cfg.ConfirmTimeout, "", ev.Queue, msg); err != nil {
		ev.Action, ev.Err = ActionReturned, err
		p.giveBack(ctx, d)
		return
	}
	p.ack(d, ev)
}

// ack acknowledges after the work it stands for is safe. If the ack fails
// the channel is gone and the broker will redeliver, which the idempotency
// key (or, for a copy already published, expiryctl's capture dedup) absorbs.
func (p *processor) ack(d *amqp.Delivery, ev *Event) {
	if err := d.Ack(false); err != nil {
		ev.Action, ev.Err = ActionReturned, fmt.Errorf("ack: %w", err)
	}
}

func (p *processor) giveBack(ctx context.Context, d *amqp.Delivery) {
	select {
	case <-ctx.Done():
		// Closing the channel on the way out requeues it anyway.
		return
	case <-time.After(p.cfg.RequeueDelay):
	}
	_ = d.Nack(false, true)
}

// publisher is a confirm-mode channel used by one goroutine, one message at
// a time: with nothing else in flight, a basic.return that precedes the
// confirm is known to be this message's.
type publisher struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

func (p *publisher) open() error {
	if p.ch != nil && !p.ch.IsClosed() {
		return nil
	}
	ch, err := p.conn.Channel()
	if err != nil {
		return fmt.Errorf("open publish channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return fmt.Errorf("enable publisher confirms: %w", err)
	}
	p.ch = ch
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 1))
	return nil
}

func (p *publisher) close() {
	if p.ch != nil {
		_ = p.ch.Close()
	}
}

// publish sends msg as mandatory and waits for the broker's confirm. An
// unroutable message is confirmed too, after being returned, so the return is
// checked: a confirm alone does not mean the copy reached a queue.
func (p *publisher) publish(ctx context.Context, timeout time.Duration, exchange, key string, msg amqp.Publishing) error {
	if err := p.open(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	confirm, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		_ = p.ch.Close()
		return fmt.Errorf("publish to exchange %q with routing key %q: %w", exchange, key, err)
	}
	acked, err := confirm.WaitContext(ctx)
	if err != nil {
		// A late confirm or return would be mistaken for the next message's.
		_ = p.ch.Close()
		return fmt.Errorf("no confirm from the broker for exchange %q routing key %q within %s", exchange, key, timeout)
	}
	if !acked {
		return fmt.Errorf("the broker refused the message for exchange %q routing key %q (nack or channel closed)", exchange, key)
	}
	select {
	case ret, ok := <-p.returns:
		if ok {
			return fmt.Errorf("no queue is bound to exchange %q for routing key %q: the broker returned the message (%d %s)",
				exchange, key, ret.ReplyCode, ret.ReplyText)
		}
	default:
	}
	return nil
}
