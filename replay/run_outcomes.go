package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// outcomeJob is what the outcome query is asked about an item: the job as
// it was published (with its fresh key, for a fresh-key request).
type outcomeJob struct {
	reservationID   string
	idempotencyKey  string
	expectedVersion *int64
}

// outcomeJobOf is the job pl publishes.
func outcomeJobOf(pl plan) outcomeJob {
	key := pl.item.idempotencyKey
	if pl.newKey != "" {
		key = pl.newKey
	}
	return outcomeJob{reservationID: pl.item.reservationID, idempotencyKey: key, expectedVersion: pl.item.expectedVersion}
}

// watchedItem is one confirmed item the watcher asks about until it is
// terminal.
type watchedItem struct {
	id        int64
	job       outcomeJob
	published time.Time
	confirmed time.Time
	// released is when the queue hands the job out: its publish, or later
	// for a message its broker delays (Message.NotBefore). Its window and its
	// latency count from then, not from a publish the worker cannot see.
	released   time.Time
	windowEnds time.Time
	// unsettled is set once the item was found past its window and not
	// terminal (and recorded so).
	unsettled bool
}

// outcomeAnswer is the outcome query's answer for one item: terminalAt nil
// means not terminal yet.
type outcomeAnswer struct {
	terminalAt *time.Time
	duplicate  bool
}

// outcomeRow is one decided outcome for replay_outcomes_record.
type outcomeRow struct {
	item                            int64
	published, confirmed, windowEnd time.Time
	terminalAt                      *time.Time
	duplicate                       bool
}

// outcomeBatch bounds the items asked about in one round trip.
const outcomeBatch = 1000

// outcomeWatch asks the policy's outcome query, on a goroutine of its own
// and a pool of its own choosing, about every item the run confirmed, until
// each is terminal or the run ends: every poll asks about all open items in
// batches of outcomeBatch per round trip and records the items decided
// since the last one in one call. The publishing loop only hands it items
// (add, under a mutex) and reads its stats, so a slow reservation database
// never slows publishing.
type outcomeWatch struct {
	window time.Duration
	every  time.Duration
	now    func() time.Time
	// ask answers for items, in order; record writes decided outcomes.
	ask    func(ctx context.Context, items []*watchedItem) ([]outcomeAnswer, error)
	record func(ctx context.Context, rows []outcomeRow) error

	mu       sync.Mutex
	incoming []*watchedItem
	stats    OutcomeStats
	// err is the first error; the watcher asks nothing more after it.
	err error

	// The watcher goroutine's own.
	open      []*watchedItem
	latencies []time.Duration

	kick chan chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newOutcomeWatch(window, every time.Duration, ask func(context.Context, []*watchedItem) ([]outcomeAnswer, error),
	record func(context.Context, []outcomeRow) error) *outcomeWatch {
	return &outcomeWatch{window: window, every: every, now: time.Now, ask: ask, record: record,
		kick: make(chan chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
}

// start runs the watcher until stop.
func (w *outcomeWatch) start() {
	go func() {
		defer close(w.done)
		tick := time.NewTicker(w.every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				w.poll()
			case reply := <-w.kick:
				w.poll()
				close(reply)
			case <-w.quit:
				w.poll()
				return
			}
		}
	}()
}

// stop polls once more and ends the watcher.
func (w *outcomeWatch) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	close(w.quit)
	<-w.done
}

// add hands the watcher an item the broker confirmed at confirmed; a
// delayed message is not handed out before notBefore (zero: at once).
func (w *outcomeWatch) add(id int64, job outcomeJob, published, confirmed, notBefore time.Time) {
	released, windowStarts := published, confirmed
	if notBefore.After(released) {
		released = notBefore
	}
	if notBefore.After(windowStarts) {
		windowStarts = notBefore
	}
	it := &watchedItem{id: id, job: job, published: published, confirmed: confirmed,
		released: released, windowEnds: windowStarts.Add(w.window)}
	w.mu.Lock()
	w.incoming = append(w.incoming, it)
	w.stats.Watched++
	w.stats.Waiting++
	w.mu.Unlock()
}

// snapshot is the stats so far and the watcher's error.
func (w *outcomeWatch) snapshot() (OutcomeStats, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats, w.err
}

// pollNow polls and waits for it, unless the watcher has ended.
func (w *outcomeWatch) pollNow(ctx context.Context) {
	reply := make(chan struct{})
	select {
	case w.kick <- reply:
	case <-w.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-reply:
	case <-ctx.Done():
	}
}

// settled waits, polling, until no watched item is waiting (each is
// terminal or past its window), ctx ends or the watcher fails; report is
// called between polls.
func (w *outcomeWatch) settled(ctx context.Context, report func(OutcomeStats)) (OutcomeStats, error) {
	for {
		w.pollNow(ctx)
		s, err := w.snapshot()
		if err != nil || s.Waiting == 0 {
			return s, err
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		report(s)
		select {
		case <-ctx.Done():
		case <-time.After(w.every):
		}
	}
}

// poll asks about every open item and records what was decided.
func (w *outcomeWatch) poll() {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	w.open = append(w.open, w.incoming...)
	w.incoming = nil
	w.mu.Unlock()
	if len(w.open) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows []outcomeRow
	var d OutcomeStats // changes to the stats
	still := w.open[:0:0]
	for lo := 0; lo < len(w.open); lo += outcomeBatch {
		items := w.open[lo:min(lo+outcomeBatch, len(w.open))]
		asked := w.now()
		answers, err := w.ask(ctx, items)
		if err != nil {
			w.fail(err)
			return
		}
		for i, it := range items {
			a := answers[i]
			switch {
			case a.terminalAt != nil:
				w.settle(it, a, &d)
				rows = append(rows, outcomeRow{item: it.id, published: it.published, confirmed: it.confirmed,
					windowEnd: it.windowEnds, terminalAt: a.terminalAt, duplicate: a.duplicate})
			case !it.unsettled && asked.After(it.windowEnds):
				it.unsettled = true
				d.Waiting--
				d.Unsettled++
				rows = append(rows, outcomeRow{item: it.id, published: it.published, confirmed: it.confirmed, windowEnd: it.windowEnds})
				still = append(still, it)
			default:
				still = append(still, it)
			}
		}
	}
	w.open = still
	if len(rows) > 0 {
		if err := w.record(ctx, rows); err != nil {
			w.fail(err)
			return
		}
	}
	p50, p99 := latencyPercentiles(w.latencies)
	w.mu.Lock()
	s := &w.stats
	s.Terminal += d.Terminal
	s.Late += d.Late
	s.Waiting += d.Waiting
	s.Unsettled += d.Unsettled
	s.Conflicts += d.Conflicts
	s.LatencyP50, s.LatencyP99 = p50, p99
	w.mu.Unlock()
}

// settle counts it terminal with answer a into d.
func (w *outcomeWatch) settle(it *watchedItem, a outcomeAnswer, d *OutcomeStats) {
	d.Terminal++
	if it.unsettled {
		d.Unsettled--
	} else {
		d.Waiting--
	}
	if a.terminalAt.After(it.windowEnds) {
		d.Late++
	}
	if a.duplicate {
		d.Conflicts++
		return
	}
	w.latencies = append(w.latencies, max(0, a.terminalAt.Sub(it.released)))
}

func (w *outcomeWatch) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// reservationsPool is the database the policy's eligibility and outcome
// queries run against: the reservation database when the runner was given
// one (`--outcome-url`), else expiryctl's own.
func (r *Runner) reservationsPool() *pgxpool.Pool {
	if r.Outcomes != nil {
		return r.Outcomes
	}
	return r.Pool
}

func (r *Runner) outcomeInterval() time.Duration {
	if r.outcomeEvery > 0 {
		return r.outcomeEvery
	}
	return time.Second
}

// startOutcomes starts watching outcomes when the policy sets a query.
func (x *replayRun) startOutcomes() {
	r, st := x.r, x.st
	q := newOutcomeQuery(st.pol.OutcomeQuery)
	if !q.enabled() {
		return
	}
	x.limits = outcomeLimitsOf(st.pol)
	if st.watch != nil && st.outcomes == nil {
		// Carried over a failover: it goes on watching what the run
		// confirmed through the lost node.
		x.watch = st.watch
		return
	}
	db := outcomeDatabase{pool: r.reservationsPool()}
	request := st.req.ID
	// An outcome belongs to an item the database knows confirmed: the
	// recorder writes what it was sent first (the watcher hears of an
	// item only after the recorder was sent it). The recorder is the
	// current leg's: a failover starts another.
	record := func(ctx context.Context, rows []outcomeRow) error {
		if err := st.recorder.Load().sync(); err != nil {
			return err
		}
		return r.tables().OutcomesRecord(ctx, request, rows)
	}
	x.watch = newOutcomeWatch(x.limits.window, r.outcomeInterval(),
		func(ctx context.Context, items []*watchedItem) ([]outcomeAnswer, error) { return db.ask(ctx, q, items) }, record)
	st.watch = x.watch
	x.watch.start()
}

// watchConfirmed hands a confirmed flight to the watcher.
func (x *replayRun) watchConfirmed(f flight) {
	if x.watch != nil {
		x.watch.add(f.item, f.job, f.published, time.Now(), f.notBefore)
	}
}

// outcomeCheck judges the watcher's stats so far against the outcome stop
// conditions, wanting minimum known outcomes.
func (x *replayRun) outcomeCheck(minimum int) *stopReason {
	if x.watch == nil {
		return nil
	}
	s, err := x.watch.snapshot()
	if err != nil {
		return outcomeFailure(x.st.req.ID, err)
	}
	if h := outcomeHalt(x.st.req.ID, x.limits, s, minimum); h != nil {
		return &stopReason{halt: h}
	}
	return nil
}

// outcomesSettled waits until every watched item is terminal or past its
// window, reporting phase, then judges the outcomes with no minimum: the
// end of the canary and of the run. Nothing more is published meanwhile.
func (x *replayRun) outcomesSettled(ctx context.Context, phase string) *stopReason {
	if x.watch == nil {
		return nil
	}
	_, err := x.watch.settled(ctx, func(OutcomeStats) { x.r.report(x.st, phase) })
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return &stopReason{err: err}
		}
		return outcomeFailure(x.st.req.ID, err)
	}
	return x.outcomeCheck(1)
}

// outcomeFailure is why a run stops when the watcher failed: a query that
// cannot be evaluated halts, as the eligibility query's does; anything else
// (a lost connection) interrupts, and the run can resume.
func outcomeFailure(request int64, err error) *stopReason {
	if qe, ok := errors.AsType[*OutcomeQueryError](err); ok {
		return &stopReason{halt: &HaltError{RequestID: request, Condition: ConditionOutcomeQuery, Reason: qe.Error()}}
	}
	return &stopReason{err: err}
}

// stopOutcomes ends the watcher and keeps its last stats for the result.
func (x *replayRun) stopOutcomes() { x.st.stopWatch() }

// stopWatch ends the run's outcome watcher, if it has one still running,
// and keeps its last stats for the result.
func (st *runState) stopWatch() {
	if st.watch == nil || st.outcomes != nil {
		return
	}
	st.watch.stop()
	s, _ := st.watch.snapshot()
	st.outcomes = &s
}

// outcomeDetails adds the outcome stats to an audit row's details.
func (st *runState) outcomeDetails(details map[string]any) map[string]any {
	if st.outcomes != nil {
		details["outcomes"] = *st.outcomes
	}
	return details
}

// outcomeQuery is the policy's outcome query as it runs (outcomeSQL).
type outcomeQuery struct {
	query string
	sql   string
}

func newOutcomeQuery(query string) outcomeQuery {
	q := policyQuery(query)
	return outcomeQuery{query: q, sql: outcomeSQL(q)}
}

func (q outcomeQuery) enabled() bool { return q.query != "" }

// outcomeAnswerOf reads one row of the outcome query, whatever its column
// types turned out to be: (terminal_at timestamptz or null, duplicate
// boolean or null); no row is "not terminal".
func outcomeAnswerOf(id int64, values []any, found bool) (outcomeAnswer, error) {
	if !found {
		return outcomeAnswer{}, nil
	}
	if len(values) == 0 {
		return outcomeAnswer{}, &OutcomeQueryError{DeadLetterID: id, Err: errors.New("it returned no columns; it must return (terminal_at timestamptz, duplicate boolean)")}
	}
	var a outcomeAnswer
	switch v := values[0].(type) {
	case time.Time:
		a.terminalAt = &v
	case nil:
	default:
		return outcomeAnswer{}, &OutcomeQueryError{DeadLetterID: id,
			Err: fmt.Errorf("its first column is %T, not timestamptz; it must return (terminal_at timestamptz, duplicate boolean)", v)}
	}
	if len(values) > 1 {
		switch v := values[1].(type) {
		case bool:
			a.duplicate = v
		case nil:
		default:
			return outcomeAnswer{}, &OutcomeQueryError{DeadLetterID: id,
				Err: fmt.Errorf("its second column is %T, not boolean; it must return (terminal_at timestamptz, duplicate boolean)", v)}
		}
	}
	return a, nil
}
