package replay

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/time/rate"
)

// runItem is one frozen item of a request with its letter, as read for a
// run or a dry run.
type runItem struct {
	id              int64
	ordinal         int
	state           string
	frozenHash      []byte
	hash            []byte
	redacted        bool
	letterStatus    string
	reingested      bool
	reservationID   string
	idempotencyKey  string
	expectedVersion *int64
	hasOrigin       bool
	exchange        string
	routingKey      string
	originQueue     string
	contentType     string
	messageID       string
	properties      []byte // nil when the letter's were not recorded
	headers         json.RawMessage
	payload         []byte
	replayCount     int
}

// itemColumns reads items only through their request: every query that
// feeds the publisher is "WHERE i.request_id = <this request>".
const itemColumns = `i.request_id, i.dead_letter_id, i.ordinal, i.state, i.payload_sha256, d.payload_sha256,
	d.redacted_at IS NOT NULL, d.status, coalesce(again.found, false),
	coalesce(d.reservation_id, ''), coalesce(d.idempotency_key, ''), d.expected_version,
	d.original_exchange IS NOT NULL OR d.original_routing_key IS NOT NULL,
	coalesce(d.original_exchange, ''), coalesce(d.original_routing_key, ''), coalesce(d.origin_queue, ''),
	coalesce(d.content_type, ''), coalesce(d.message_id, ''), d.properties, d.headers, d.payload, d.replay_count`

// againJoin finds a newer letter of the same job (the letter died again
// since it was frozen). A lateral LIMIT 1 probes the partial index on
// previous_id per item; an EXISTS lets the planner hash the whole archive.
const againJoin = `LEFT JOIN LATERAL (SELECT true AS found FROM expiryctl.dead_letters n
		WHERE n.previous_id = d.id LIMIT 1) again ON true`

// letterByItem reads each item's letter by its primary key. The LIMIT keeps
// the subquery from being flattened into a join, which the planner, short of
// statistics on a freshly frozen request, may make a hash join over a read
// of the whole archive for every window.
const letterByItem = `CROSS JOIN LATERAL (SELECT * FROM expiryctl.dead_letters l
		WHERE l.id = i.dead_letter_id LIMIT 1) d`

// loadItems reads the items of request whose ordinals lie in [lo, hi], in
// ordinal order, in the given states (all states when none are given).
// Reading by an ordinal window rather than "after ordinal, LIMIT n" keeps
// each read bounded whatever plan the database picks: with the item table
// not yet analysed after a large request was frozen, the planner takes the
// (request, state, ordinal) index and, asked for the first n by ordinal,
// would read and sort every open item of the request for every chunk.
func loadItems(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, request int64, lo, hi int, states []string) ([]*runItem, error) {
	sql := `SELECT ` + itemColumns + ` FROM expiryctl.replay_items i
		` + letterByItem + `
		` + againJoin + `
		WHERE i.request_id = $1 AND i.ordinal BETWEEN $2 AND $3 AND (cardinality($4::text[]) = 0 OR i.state = ANY($4))
		ORDER BY i.ordinal`
	if states == nil {
		states = []string{}
	}
	rows, err := q.Query(ctx, sql, request, lo, hi, states)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*runItem, error) {
		it := &runItem{}
		var req int64
		// Headers are read as plain bytes: scanned into a json.RawMessage,
		// pgx would validate them through encoding/json, and replayHeaders
		// decodes them anyway.
		var headers []byte
		err := row.Scan(&req, &it.id, &it.ordinal, &it.state, &it.frozenHash, &it.hash, &it.redacted, &it.letterStatus,
			&it.reingested, &it.reservationID, &it.idempotencyKey, &it.expectedVersion, &it.hasOrigin, &it.exchange,
			&it.routingKey, &it.originQueue, &it.contentType, &it.messageID, &it.properties, &headers, &it.payload, &it.replayCount)
		it.headers = headers
		// The hash of the bytes about to be published, not the stored
		// column: a payload changed behind the archive's back is refused
		// item by item (changed says so), whatever the columns claim.
		sum := sha256.Sum256(it.payload)
		it.hash = sum[:]
		if err == nil && req != request {
			// Cannot happen with the WHERE above; checked because publishing
			// an item of another request would break the approval.
			err = fmt.Errorf("item %d belongs to request %d, not %d: refusing to publish it", it.id, req, request)
		}
		return it, err
	})
}

// target is where a replay sends the item: its original exchange and routing
// key, else the queue it died in (through the default exchange), else the
// request's own target.
func (it *runItem) target(req Request) (exchange, key string, ok bool) {
	switch {
	case it.hasOrigin:
		return it.exchange, it.routingKey, true
	case it.originQueue != "":
		return "", it.originQueue, true
	case req.ToExchange != "" || req.ToRoutingKey != "":
		return req.ToExchange, req.ToRoutingKey, true
	}
	return "", "", false
}

// changed says how the letter changed since its request was frozen (as
// replay_cohort_changes does in the database), or "".
func (it *runItem) changed() string {
	switch {
	case it.redacted:
		return "redacted by retention"
	case string(it.hash) != string(it.frozenHash):
		return "payload changed since the cohort was frozen"
	case it.letterStatus == "discarded":
		return "discarded"
	case it.reingested:
		return "dead-lettered again since the cohort was frozen (a newer letter of the job exists)"
	}
	return ""
}

// Plan actions for an item.
const (
	actionReplay  = "replay"
	actionSkip    = "skip"
	actionBlock   = "block"
	actionFail    = "fail"
	actionDiscard = "discard"
	actionDone    = "done"
)

// plan is what the runner will do with one item and why.
type plan struct {
	item   *runItem
	action string
	reason string
	target string
	msg    Message
	newKey string
}

func describeTarget(exchange, key string) string {
	if exchange == "" {
		return "queue " + key + " (default exchange)"
	}
	return "exchange " + exchange + " key " + key
}

// planItems decides each item: blocked (changed since frozen, no target,
// unreadable), failed (target exchange missing), skipped (not eligible) or
// replayed, with the message it would be. Eligibility runs last, only for
// items that would otherwise be replayed.
// replayedBy is the name sent as x-replayed-by: the run's label.
func (r *Runner) planItems(ctx context.Context, req Request, replayedBy string, elig eligibility, items []*runItem, exchanges map[string]bool) ([]plan, error) {
	plans := make([]plan, len(items))
	var candidates []*runItem
	idx := map[int64]int{}
	for i, it := range items {
		p := plan{item: it}
		plans[i] = p
		idx[it.id] = i
		if why := it.changed(); why != "" {
			plans[i].action, plans[i].reason = actionBlock, why
			continue
		}
		exchange, key, ok := it.target(req)
		if !ok {
			plans[i].action, plans[i].reason = actionBlock, "no target: the letter names no origin and the request no --to-exchange/--routing-key"
			continue
		}
		plans[i].target = describeTarget(exchange, key)
		exists, known := exchanges[exchange]
		if !known && r.Broker != nil {
			var err error
			if exists, err = r.Broker.ExchangeExists(ctx, exchange); err != nil {
				return nil, err
			}
			exchanges[exchange] = exists
		} else if !known {
			exists = true
		}
		if !exists {
			plans[i].action, plans[i].reason = actionFail, fmt.Sprintf("exchange %q does not exist on the broker", exchange)
			continue
		}
		props, moved, err := replayProperties(it.properties, it.contentType, it.messageID, r.PublishAs)
		if err != nil {
			plans[i].action, plans[i].reason = actionBlock, "stored properties cannot be decoded: "+err.Error()
			continue
		}
		headers, err := replayHeaders(it.headers, req, replayedBy, it.id, it.replayCount, r.now(), moved)
		if err != nil {
			plans[i].action, plans[i].reason = actionBlock, "stored headers cannot be decoded: "+err.Error()
			continue
		}
		body, messageID := it.payload, props.MessageID
		if req.FreshKey {
			var newKey string
			body, newKey, err = rewriteIdempotencyKey(it.payload, req.ID)
			if err != nil {
				plans[i].action, plans[i].reason = actionBlock, "cannot give it a fresh key: "+err.Error()
				continue
			}
			plans[i].newKey = newKey
			if messageID != "" {
				messageID = freshKey(messageID, req.ID)
			}
		}
		plans[i].action = actionReplay
		props.MessageID = messageID
		plans[i].msg = Message{Item: it.id, Exchange: exchange, RoutingKey: key, Properties: props,
			Headers: headers, Body: body}
		candidates = append(candidates, it)
	}
	ineligible, err := elig.checkAll(ctx, r.Pool.BeginTx, candidates)
	if err != nil {
		return nil, err
	}
	for id, why := range ineligible {
		p := &plans[idx[id]]
		p.action, p.reason, p.msg = actionSkip, why, Message{}
	}
	return plans, nil
}

// outgoing is a message with its item's ordinal, which lets the recorder
// find the item by the (request, ordinal) index.
type outgoing struct {
	Message
	ordinal int
}

// batch is one chunk of items marked publishing, ready to go out.
type batch struct {
	msgs []outgoing
	// wasPublishing marks items an earlier run had already marked
	// publishing (and may have sent).
	wasPublishing map[int64]bool
	skipped       []ItemOutcome
	failed        []ItemOutcome
	last          bool
	halt          *HaltError
	stopped       Status
	err           error
	// asked is the n this batch answers.
	asked int
}

// preparer turns the request's open items into batches marked publishing,
// ahead of the publisher, in two stages on goroutines of their own: a
// planner reads windows of items and builds their messages (the costly
// decoding), one window ahead; the marker, when the publisher asks for n,
// runs the eligibility query on the next n publishable items and marks them
// publishing in one transaction. Eligibility is judged at marking, so a
// canary window spent waiting never leaves a stale answer behind. The
// preparer's database work does not take the run's context: a chunk being
// marked is finished, never left half known.
type preparer struct {
	r         *Runner
	st        *runState
	elig      eligibility
	exchanges map[string]bool
	window    int
	queues    *depthQueues
	want      chan int
	out       chan batch

	planned chan planned
	stop    chan struct{}
	pending []plan
	drained bool
}

// planned is one window of items, planned without eligibility.
type planned struct {
	plans []plan
	last  bool
	err   error
}

// markAhead is how many chunks may be asked for (and be being marked, in
// concurrent transactions) ahead of the publisher.
const markAhead = 2

func newPreparer(r *Runner, st *runState, window int, queues *depthQueues) *preparer {
	return &preparer{r: r, st: st, elig: newEligibility(st.pol.EligibilityQuery), exchanges: map[string]bool{}, window: window, queues: queues,
		want: make(chan int, markAhead), out: make(chan batch, markAhead), planned: make(chan planned, 1), stop: make(chan struct{})}
}

func (p *preparer) loop() {
	defer close(p.out)
	planning := make(chan struct{})
	go func() {
		defer close(planning)
		p.plan()
	}()
	defer func() {
		close(p.stop)
		<-planning
	}()
	// Chunks are chosen in order here, then marked concurrently (up to
	// markAhead), and their batches go out in the order they were asked for.
	order := make(chan chan batch, markAhead)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		for rc := range order {
			p.out <- <-rc
		}
	}()
	defer func() {
		close(order)
		<-delivered
	}()
	done := false
	for n := range p.want {
		rc := make(chan batch, 1)
		order <- rc
		if done {
			rc <- batch{last: true, asked: n}
			continue
		}
		plans, b, final := p.choose(n)
		if final {
			b.asked = n
			rc <- b
			done = true
			continue
		}
		go func() {
			b := p.mark(plans)
			b.asked = n
			rc <- b
		}()
	}
}

// plan reads the open items window by window (windows of ordinals, which
// keeps every read bounded by index however stale the table statistics)
// and plans them, until the cohort ends or the preparer stops.
func (p *preparer) plan() {
	req := p.st.req
	send := func(pl planned) bool {
		select {
		case p.planned <- pl:
			return true
		case <-p.stop:
			return false
		}
	}
	none := eligibility{}
	for after := -1; ; {
		if after >= p.st.maxOrdinal {
			send(planned{last: true})
			return
		}
		lo, hi := after+1, after+p.window
		after = hi
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		items, err := loadItems(ctx, p.r.Pool, req.ID, lo, hi, []string{"pending", "publishing"})
		for _, it := range items {
			p.queues.add(it.depthQueue(req))
		}
		var plans []plan
		if err == nil && len(items) > 0 {
			plans, err = p.r.planItems(ctx, req, p.st.label, none, items, p.exchanges)
		}
		cancel()
		if err != nil {
			send(planned{err: fmt.Errorf("read the items of replay request %d: %w", req.ID, err)})
			return
		}
		if len(plans) > 0 && !send(planned{plans: plans}) {
			return
		}
	}
}

// choose takes the next plans holding up to n publishable items (with the
// skipped and failed ones among them). final is set, with the batch to
// send, when there is nothing left or the planner failed.
func (p *preparer) choose(n int) ([]plan, batch, bool) {
	replays := func() int {
		c := 0
		for _, pl := range p.pending {
			if pl.action == actionReplay {
				c++
			}
		}
		return c
	}
	for !p.drained && replays() < n {
		w := <-p.planned
		if w.err != nil {
			return nil, batch{err: w.err}, true
		}
		p.pending = append(p.pending, w.plans...)
		p.drained = w.last
	}
	// The prefix of pending with n replays, and whatever else lies in it.
	take, seen := 0, 0
	for take < len(p.pending) && seen < n {
		if p.pending[take].action == actionReplay {
			seen++
		}
		take++
	}
	if take == 0 {
		return nil, batch{last: true}, true
	}
	plans := p.pending[:take:take]
	p.pending = p.pending[take:]
	return plans, batch{}, false
}

// mark judges the eligibility of the chosen plans' publishable items and
// commits every item's state: skipped, failed, or publishing.
func (p *preparer) mark(plans []plan) batch {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := p.st.req
	var candidates []*runItem
	for _, pl := range plans {
		if pl.action == actionReplay {
			candidates = append(candidates, pl.item)
		}
	}
	ineligible, err := p.elig.checkAll(ctx, p.r.Pool.BeginTx, candidates)
	var eligErr *EligibilityError
	if errors.As(err, &eligErr) {
		return batch{halt: &HaltError{RequestID: req.ID, Condition: ConditionEligibility, Reason: eligErr.Error()}}
	}
	if err != nil {
		return batch{err: err}
	}
	// Updates name the ordinal range too, so that they read the chunk's
	// rows by index, not every item of a large request.
	lo, hi := plans[0].item.ordinal, plans[len(plans)-1].item.ordinal
	b := batch{wasPublishing: map[int64]bool{}}
	var skipIDs, failIDs, pubIDs []int64
	var skipWhy, failWhy []string
	for _, pl := range plans {
		if why, no := ineligible[pl.item.id]; no {
			pl.action, pl.reason = actionSkip, why
		}
		switch pl.action {
		case actionReplay:
			b.msgs = append(b.msgs, outgoing{Message: pl.msg, ordinal: pl.item.ordinal})
			pubIDs = append(pubIDs, pl.item.id)
			if pl.item.state == "publishing" {
				b.wasPublishing[pl.item.id] = true
			}
		case actionFail:
			failIDs, failWhy = append(failIDs, pl.item.id), append(failWhy, pl.reason)
			b.failed = append(b.failed, ItemOutcome{DeadLetterID: pl.item.id, State: "failed", Reason: pl.reason})
		default:
			why := pl.reason
			if pl.action == actionBlock {
				why = "blocked: " + why
			}
			skipIDs, skipWhy = append(skipIDs, pl.item.id), append(skipWhy, why)
			b.skipped = append(b.skipped, ItemOutcome{DeadLetterID: pl.item.id, State: "skipped", Reason: why})
		}
	}
	// replay_items_mark commits the window's decisions in one statement,
	// unless the request stopped running (a cancel), which it reports.
	var stopped Status
	var status Status
	err = p.r.Pool.QueryRow(ctx, `SELECT expiryctl.replay_items_mark($1, $2, $3, $4, $5, $6, $7, $8)`,
		req.ID, lo, hi, nonNil(pubIDs), nonNil(skipIDs), nonNilText(skipWhy), nonNil(failIDs), nonNilText(failWhy)).Scan(&status)
	err = asRefusal(err)
	if err == nil && status != StatusRunning {
		stopped = status
	}
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal) && refusal.Rule == "approved-to-run":
		return batch{stopped: StatusCancelled}
	case err != nil:
		return batch{err: fmt.Errorf("mark items of replay request %d publishing: %w", req.ID, err)}
	case stopped != "":
		return batch{stopped: stopped}
	}
	return b
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func nonNilText(texts []string) []string {
	if texts == nil {
		return []string{}
	}
	return texts
}

// outcome is one broker answer for the recorder.
type outcome struct {
	id      int64
	ordinal int
	failed  bool
	why     string
}

// recorder writes broker answers in batches on its own goroutine: items
// confirmed (and their letters replayed) or failed, in one transaction per
// batch. An item is written confirmed only from an ack.
type recorder struct {
	r       *Runner
	request int64
	in      chan outcome
	flush   chan chan error
	done    chan struct{}
	// failed is closed at the first write error; err is that error, set
	// before failed closes and never changed after.
	failed chan struct{}
	err    error
	// unrecorded holds answers that could not be written once a write
	// failed; read only after done is closed.
	unrecorded []outcome
}

func newRecorder(r *Runner, request int64) *recorder {
	rec := &recorder{r: r, request: request, in: make(chan outcome, 8192), flush: make(chan chan error),
		done: make(chan struct{}), failed: make(chan struct{})}
	go rec.loop()
	return rec
}

func (rec *recorder) loop() {
	defer close(rec.done)
	const maxBatch = 1000
	var buf []outcome
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	write := func() {
		if len(buf) == 0 {
			return
		}
		if rec.err != nil {
			rec.unrecorded = append(rec.unrecorded, buf...)
			buf = buf[:0]
			return
		}
		if err := rec.write(buf); err != nil {
			rec.err = err
			close(rec.failed)
			rec.unrecorded = append(rec.unrecorded, buf...)
		}
		buf = buf[:0]
	}
	for {
		select {
		case o, ok := <-rec.in:
			if !ok {
				write()
				return
			}
			if rec.err != nil {
				rec.unrecorded = append(rec.unrecorded, o)
				continue
			}
			buf = append(buf, o)
			if len(buf) >= maxBatch {
				write()
			}
		case <-tick.C:
			write()
		case reply := <-rec.flush:
			// Everything sent before the flush request is in rec.in ahead
			// of nothing: take it all first.
			for drained := false; !drained; {
				select {
				case o, ok := <-rec.in:
					if !ok {
						drained = true
						break
					}
					buf = append(buf, o)
				default:
					drained = true
				}
			}
			write()
			if rec.err != nil {
				reply <- fmt.Errorf("record broker answers: %w", rec.err)
			} else {
				reply <- nil
			}
		}
	}
}

func (rec *recorder) write(buf []outcome) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var confirmed, failed []int64
	var whys []string
	lo, hi := buf[0].ordinal, buf[0].ordinal
	for _, o := range buf {
		lo, hi = min(lo, o.ordinal), max(hi, o.ordinal)
		if o.failed {
			failed, whys = append(failed, o.id), append(whys, o.why)
		} else {
			confirmed = append(confirmed, o.id)
		}
	}
	// Items are found by the batch's ordinal range and an id list, never by
	// joining an unnest: the items table is rarely analysed during a run,
	// and a cached generic plan then joins the unnest by nested loop, a
	// thousand comparisons per item.
	// replay_items_record writes confirms (and the letters replayed) and
	// failures in one statement; a confirm only of an item publishing.
	_, err := rec.r.Pool.Exec(ctx, `SELECT expiryctl.replay_items_record($1, $2, $3, $4, $5, $6)`,
		rec.request, lo, hi, nonNil(confirmed), nonNil(failed), nonNilText(whys))
	return asRefusal(err)
}

// sync writes everything sent so far and reports the first write error.
func (rec *recorder) sync() error {
	reply := make(chan error, 1)
	select {
	case rec.flush <- reply:
		return <-reply
	case <-rec.failed:
		return rec.err
	}
}

// close writes what is left and stops the recorder.
func (rec *recorder) close() error {
	close(rec.in)
	<-rec.done
	return rec.err
}

// flight is a published message waiting for its confirm.
type flight struct {
	item      int64
	ordinal   int
	pending   Pending
	republish bool
}

// replayRun is the publishing side of one run.
type replayRun struct {
	r       *Runner
	st      *runState
	limiter *rate.Limiter
	chunk   int
	prep    *preparer
	rec     *recorder
	// outstanding counts chunks asked for and not yet taken; requested
	// sums what they asked for.
	outstanding, requested int
	ended                  bool // the preparer sent its last batch or stopped
	queue                  []outgoing
	wasPub                 map[int64]bool
	// unsent are items this run marked publishing but has not published.
	unsent    map[int64]bool
	inflight  []flight
	lost      error
	lostCount int
	depthQs   depthQueues
	lastCheck time.Time
	// The prober reads the stop conditions' numbers off the loop's
	// goroutine, so that a slow server never stalls publishing; probing
	// is true while a probe is outstanding.
	probeReq   chan struct{}
	probeRes   chan probe
	proberDone chan struct{}
	probing    bool

	// canaryTarget is how many publishes the canary phase makes (0: no
	// canary phase left); canaryPublished counts them.
	canaryTarget, canaryPublished int
	canaryWaitFrom                *time.Duration // canary already published: time already waited
}

// burstFor is the limiter's burst: a twentieth of a second's worth, at
// least one, so that no one-second window carries more than rate + burst.
func burstFor(r float64) int {
	return int(math.Max(1, math.Min(math.Ceil(r/20), 1<<20)))
}

// chunkFor is how many items are marked publishing at a time: about a
// second's worth, so that eligibility is judged at most a second or two
// before the publish, and a crash leaves few items publishing-but-unsent.
func chunkFor(r float64) int {
	return int(math.Max(1, math.Min(math.Ceil(r), 1000)))
}

// replay publishes the request's open items: canary, canary window, then
// the rest, checking the stop conditions as it goes.
func (r *Runner) replay(ctx context.Context, st *runState) error {
	req := st.req
	x := &replayRun{r: r, st: st, limiter: rate.NewLimiter(rate.Limit(req.Rate), burstFor(req.Rate)),
		chunk: chunkFor(req.Rate), wasPub: map[int64]bool{}, unsent: map[int64]bool{}}
	if err := x.initCanary(ctx); err != nil {
		return r.interrupt(ctx, st, err, nil, 0)
	}
	x.prep = newPreparer(r, st, x.chunk, &x.depthQs)
	x.startProber()
	go x.prep.loop()
	x.rec = newRecorder(r, req.ID)
	return x.run(ctx)
}

func (x *replayRun) initCanary(ctx context.Context) error {
	req := x.st.req
	if req.Canary <= 0 {
		return nil
	}
	// Only replay_canary_record writes these rows "ok" (audit_append
	// refuses to), so a forged one cannot shorten or skip the canary.
	var passed bool
	if err := x.r.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM expiryctl.audit_log WHERE target = $1
		AND action = 'replay.canary.pass' AND outcome = 'ok' AND (details->>'approval')::int = $2)`, requestTarget(req.ID), req.Approvals).Scan(&passed); err != nil {
		return err
	}
	if passed {
		return nil
	}
	var waited float64
	err := x.r.Pool.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - at)::float8 FROM expiryctl.audit_log
		WHERE target = $1 AND action = 'replay.canary.start' AND outcome = 'ok' AND (details->>'approval')::int = $2
		ORDER BY seq DESC LIMIT 1`, requestTarget(req.ID), req.Approvals).Scan(&waited)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		x.canaryTarget = req.Canary
	case err != nil:
		return err
	default:
		// An earlier run published this approval's canary and died in its
		// window: wait out the rest, publish no second canary.
		d := time.Duration(waited * float64(time.Second))
		x.canaryWaitFrom = &d
	}
	return nil
}

// depthQueue is the queue a replay of the item fills whose depth is the
// headroom stop condition: the target queue when the item is routed by
// queue name, else the queue it died in; "" when neither is known.
func (it *runItem) depthQueue(req Request) string {
	switch {
	case it.hasOrigin && it.exchange == "":
		return it.routingKey
	case it.hasOrigin || it.originQueue != "":
		return it.originQueue
	case req.ToExchange == "":
		return req.ToRoutingKey
	}
	return ""
}

// maxDepthQueues bounds the queues whose depth each check reads.
const maxDepthQueues = 20

// depthQueues collects the depth queues of the items as the planner reads
// them, so that every item's queue is known before the item is published,
// without a pass over the whole cohort before the first publish. The
// planner adds, the prober reads.
type depthQueues struct {
	mu     sync.Mutex
	queues []string
}

func (d *depthQueues) add(q string) {
	if q == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queues) >= maxDepthQueues || slices.Contains(d.queues, q) {
		return
	}
	d.queues = append(d.queues, q)
}

func (d *depthQueues) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.queues)
}

// ask requests chunks from the preparer, up to markAhead at a time, while
// no more than a chunk is queued: at most about three chunks (three seconds
// of the rate, or 3,000 items) are marked publishing ahead of the
// publisher, which bounds what a crash leaves marked but unsent.
func (x *replayRun) ask() {
	for x.outstanding < markAhead && !x.ended && len(x.queue) <= x.chunk {
		n := x.chunk
		if x.canaryTarget > 0 {
			n = x.canaryTarget - x.canaryPublished - len(x.queue) - x.requested
			if n <= 0 {
				return
			}
			n = min(n, x.chunk)
		}
		x.prep.want <- n
		x.outstanding++
		x.requested += n
	}
}

// take accepts a prepared batch.
func (x *replayRun) take(b batch) *stopReason {
	x.outstanding--
	x.requested -= b.asked
	st := x.st
	st.skipped += len(b.skipped)
	for _, f := range b.failed {
		st.failed++
		st.failedRun++
		st.attempted++
		st.failedItems = append(st.failedItems, f)
	}
	switch {
	case b.err != nil:
		x.ended = true
		return &stopReason{err: b.err}
	case b.halt != nil:
		x.ended = true
		return &stopReason{halt: b.halt}
	case b.stopped != "":
		x.ended = true
		return &stopReason{stopped: b.stopped}
	case b.last:
		x.ended = true
		return nil
	}
	for _, m := range b.msgs {
		x.queue = append(x.queue, m)
		if b.wasPublishing[m.Item] {
			x.wasPub[m.Item] = true
		} else {
			x.unsent[m.Item] = true
		}
	}
	return nil
}

// stopReason is why the publishing loop stops early.
type stopReason struct {
	halt    *HaltError
	stopped Status
	err     error
}

// settle handles the answer for the oldest flight.
func (x *replayRun) settle() {
	f := x.inflight[0]
	x.inflight = x.inflight[1:]
	st := x.st
	err := f.pending.Outcome()
	var failure *PublishFailure
	switch {
	case err == nil:
		st.confirmed++
		st.confirmedRun++
		st.attempted++
		x.rec.in <- outcome{id: f.item, ordinal: f.ordinal}
	case errors.As(err, &failure):
		st.failed++
		st.failedRun++
		st.attempted++
		st.failedItems = append(st.failedItems, ItemOutcome{DeadLetterID: f.item, State: "failed", Reason: failure.Error()})
		x.rec.in <- outcome{id: f.item, ordinal: f.ordinal, failed: true, why: failure.Error()}
	default:
		// Channel gone: nobody knows whether it arrived. It stays
		// publishing and goes out again on resume.
		if x.lost == nil {
			x.lost = err
		}
		x.lostCount++
	}
}

// settleReady handles every flight whose answer is in, oldest first.
func (x *replayRun) settleReady() {
	for len(x.inflight) > 0 {
		select {
		case <-x.inflight[0].pending.Done():
			x.settle()
		default:
			return
		}
	}
}

// drain waits for every flight's answer, bounded by timeout.
func (x *replayRun) drain(timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for len(x.inflight) > 0 {
		select {
		case <-x.inflight[0].pending.Done():
			x.settle()
		case <-deadline.C:
			if x.lost == nil {
				x.lost = fmt.Errorf("no confirm from the broker within %s", timeout)
			}
			x.lostCount += len(x.inflight)
			x.inflight = nil
			return
		}
	}
}

func (x *replayRun) run(ctx context.Context) error {
	r, st := x.r, x.st
	check := time.NewTicker(r.checkInterval())
	defer check.Stop()
	window := r.windowSize()
	var waitC <-chan time.Time
	ready := false // the limiter allowed the next publish
	phase := "replay"
	if x.canaryTarget > 0 {
		phase = "canary"
	}
	if x.canaryWaitFrom != nil {
		if stop := x.canaryWait(ctx, *x.canaryWaitFrom); stop != nil {
			return x.finish(ctx, stop)
		}
	}
	x.ask()
	for {
		select {
		case p := <-x.probeRes:
			if stop := x.probed(p, phase == "canary"); stop != nil {
				return x.finish(ctx, stop)
			}
		default:
		}
		x.settleReady()
		if x.lost != nil {
			return x.finish(ctx, &stopReason{err: x.lost})
		}
		if err := x.recErr(); err != nil {
			return x.finish(ctx, &stopReason{err: err})
		}
		st.inFlight = len(x.inflight)
		r.report(st, phase)

		// The canary is out: wait for its outcome before anything more.
		if x.canaryTarget > 0 && (x.canaryPublished >= x.canaryTarget || (x.ended && len(x.queue) == 0)) {
			if x.canaryPublished == 0 {
				x.canaryTarget = 0
				continue
			}
			// Nothing beyond the canary was asked for (ask stops at the
			// canary's size), so nothing else waits marked meanwhile.
			if stop := x.canaryWait(ctx, -1); stop != nil {
				return x.finish(ctx, stop)
			}
			x.canaryTarget, phase = 0, "replay"
			x.ask()
			continue
		}
		if x.ended && len(x.queue) == 0 && len(x.inflight) == 0 {
			return x.finish(ctx, nil)
		}

		var headDone <-chan struct{}
		if len(x.inflight) > 0 {
			headDone = x.inflight[0].pending.Done()
		}
		var batchC <-chan batch
		if x.outstanding > 0 {
			batchC = x.prep.out
		}
		canPublish := len(x.queue) > 0 && len(x.inflight) < window
		if canPublish && !ready && waitC == nil {
			res := x.limiter.Reserve()
			if d := res.Delay(); d <= 0 {
				ready = true
			} else {
				waitC = time.After(d)
			}
		}
		if canPublish && ready {
			m := x.queue[0]
			if !x.unsent[m.Item] && !x.wasPub[m.Item] {
				return x.finish(ctx, &stopReason{err: fmt.Errorf("item %d was not marked publishing by this run: refusing to publish it", m.Item)})
			}
			p, err := r.Broker.Publish(ctx, m.Message)
			if err != nil {
				if ctx.Err() != nil {
					return x.finish(ctx, &stopReason{err: ctx.Err()})
				}
				return x.finish(ctx, &stopReason{err: err})
			}
			x.queue = x.queue[1:]
			ready = false
			republish := x.wasPub[m.Item]
			delete(x.unsent, m.Item)
			delete(x.wasPub, m.Item)
			x.inflight = append(x.inflight, flight{item: m.Item, ordinal: m.ordinal, pending: p, republish: republish})
			st.published++
			if republish {
				st.republished++
			}
			if x.canaryTarget > 0 {
				x.canaryPublished++
			}
			x.ask()
			if time.Since(x.lastCheck) >= r.checkInterval() {
				x.requestProbe()
			}
			continue
		}
		select {
		case <-ctx.Done():
			return x.finish(ctx, &stopReason{err: ctx.Err()})
		case <-headDone:
		case b, ok := <-batchC:
			if !ok {
				x.outstanding, x.requested, x.ended = 0, 0, true
				continue
			}
			if stop := x.take(b); stop != nil {
				return x.finish(ctx, stop)
			}
			x.ask()
		case <-waitC:
			waitC, ready = nil, true
		case <-check.C:
			x.requestProbe()
		case p := <-x.probeRes:
			if stop := x.probed(p, phase == "canary"); stop != nil {
				return x.finish(ctx, stop)
			}
		}
	}
}

// recErr reports the recorder's first write error without waiting.
func (x *replayRun) recErr() error {
	select {
	case <-x.rec.failed:
		return x.rec.err
	default:
	}
	return nil
}

// probe is what one check reads from the servers: whether the request
// still runs (through the lock session, which also shows the session still
// stands), the depth of the target queues and how many of the request's
// letters were captured again.
type probe struct {
	status Status
	depths []queueDepth
	redead int
	err    error
}

type queueDepth struct {
	queue string
	depth int
}

func (x *replayRun) startProber() {
	x.probeReq, x.probeRes, x.proberDone = make(chan struct{}), make(chan probe, 1), make(chan struct{})
	go func() {
		defer close(x.proberDone)
		for range x.probeReq {
			x.probeRes <- x.probeOnce()
		}
	}()
}

// stopProber waits for an outstanding probe and ends the prober, so that
// nothing uses the lock session once the run lets it go.
func (x *replayRun) stopProber() {
	if x.probeReq == nil {
		return
	}
	if x.probing {
		<-x.probeRes
		x.probing = false
	}
	close(x.probeReq)
	<-x.proberDone
	x.probeReq = nil
}

func (x *replayRun) probeOnce() probe {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p probe
	if p.status, _, p.err = x.st.lock.status(ctx); p.err != nil || p.status != StatusRunning {
		return p
	}
	for _, q := range x.depthQs.list() {
		depth, exists, err := x.r.Broker.QueueDepth(ctx, q)
		if err != nil {
			p.err = fmt.Errorf("inspect the depth of queue %s: %w", q, err)
			return p
		}
		if exists {
			p.depths = append(p.depths, queueDepth{q, depth})
		}
	}
	if err := x.r.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, x.st.req.ID).Scan(&p.redead); err != nil {
		p.err = err
	}
	return p
}

// requestProbe starts a probe unless one is outstanding.
func (x *replayRun) requestProbe() {
	if !x.probing {
		x.probeReq <- struct{}{}
		x.probing = true
	}
}

// check probes now, waiting for the answer, and judges it.
func (x *replayRun) check(canary bool) *stopReason {
	if x.probing {
		<-x.probeRes
		x.probing = false
	}
	x.requestProbe()
	p := <-x.probeRes
	return x.probed(p, canary)
}

// probed judges a probe's numbers, with this run's publish counts, against
// the stop conditions.
func (x *replayRun) probed(p probe, canary bool) *stopReason {
	r, st := x.r, x.st
	x.probing = false
	x.lastCheck = time.Now()
	if p.err != nil {
		return &stopReason{err: p.err}
	}
	if p.status != StatusRunning {
		return &stopReason{stopped: p.status}
	}
	req := st.req
	minAttempts := r.minFailureAttempts()
	if canary {
		minAttempts = min(minAttempts, max(1, req.Canary))
	}
	if h := x.failureHalt(minAttempts); h != nil {
		return &stopReason{halt: h}
	}
	for _, d := range p.depths {
		if d.depth > req.Stop.QueueDepth {
			return &stopReason{halt: &HaltError{RequestID: req.ID, Condition: ConditionQueueDepth,
				Reason: fmt.Sprintf("queue %s holds %d messages, above the stop condition of %d", d.queue, d.depth, req.Stop.QueueDepth)}}
		}
	}
	if h := x.redeadFrom(p.redead); h != nil {
		return &stopReason{halt: h}
	}
	return nil
}

func (x *replayRun) failureHalt(minAttempts int) *HaltError {
	st := x.st
	if st.attempted < minAttempts || st.attempted == 0 {
		return nil
	}
	ratio := float64(st.failedRun) / float64(st.attempted)
	if ratio <= st.req.Stop.FailureRatio {
		return nil
	}
	return &HaltError{RequestID: st.req.ID, Condition: ConditionFailureRatio,
		Reason: fmt.Sprintf("%d of %d publishes failed (ratio %.3f, above the stop condition %g)", st.failedRun, st.attempted, ratio, st.req.Stop.FailureRatio)}
}

// redeadHalt counts letters of this request captured again (dead-lettered
// after their replay; `dlq ingest` links them by x-replay-request) and
// judges them.
func (x *replayRun) redeadHalt(ctx context.Context) (*HaltError, error) {
	var n int
	if err := x.r.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, x.st.req.ID).Scan(&n); err != nil {
		return nil, err
	}
	return x.redeadFrom(n), nil
}

// redeadFrom judges n, the request's letters captured again so far: those
// since the run started, over the items this run confirmed.
func (x *replayRun) redeadFrom(n int) *HaltError {
	st := x.st
	if st.confirmedRun == 0 {
		return nil
	}
	redead := n - st.redeadBase
	ratio := float64(redead) / float64(st.confirmedRun)
	if redead <= 0 || ratio <= st.req.Stop.RedeadRatio {
		return nil
	}
	return &HaltError{RequestID: st.req.ID, Condition: ConditionRedeadRatio,
		Reason: fmt.Sprintf("%d of %d replayed letters died again (ratio %.3f, above the stop condition %g)", redead, st.confirmedRun, ratio, st.req.Stop.RedeadRatio)}
}

// canaryWait waits out the canary window once every canary publish has its
// answer, halting early when the canary's letters die again or fail. waited
// is how much of the window an earlier run already waited (-1: the canary
// was just published by this run).
func (x *replayRun) canaryWait(ctx context.Context, waited time.Duration) *stopReason {
	r, st := x.r, x.st
	req := st.req
	x.drain(30 * time.Second)
	if x.lost != nil {
		return &stopReason{err: x.lost}
	}
	if err := x.rec.sync(); err != nil {
		return &stopReason{err: err}
	}
	if waited < 0 {
		waited = 0
		err := recordCanary(ctx, r, req.ID, false, map[string]any{"published": x.canaryPublished, "confirmed": st.confirmedRun,
			"failed": st.failedRun, "window_seconds": req.Stop.CanaryWindow.Seconds()})
		if err != nil {
			return &stopReason{err: err}
		}
	}
	end := time.Now().Add(req.Stop.CanaryWindow - waited)
	tick := time.NewTicker(r.checkInterval())
	defer tick.Stop()
	for {
		st.canaryLeft = max(0, time.Until(end))
		r.report(st, "canary-wait")
		if stop := x.check(true); stop != nil {
			return stop
		}
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return &stopReason{err: ctx.Err()}
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
	}
	st.canaryLeft = 0
	// The canary's failures are judged with no minimum: it is small on
	// purpose.
	if h := x.failureHalt(1); h != nil {
		return &stopReason{halt: h}
	}
	var redead int
	if err := r.Pool.QueryRow(ctx, `SELECT count(*) FROM expiryctl.dead_letters WHERE replay_request_id = $1`, req.ID).Scan(&redead); err != nil {
		return &stopReason{err: err}
	}
	err := recordCanary(ctx, r, req.ID, true, map[string]any{"confirmed": st.confirmedRun, "failed": st.failedRun,
		"redead": redead - st.redeadBase, "window_seconds": req.Stop.CanaryWindow.Seconds()})
	if err != nil {
		return &stopReason{err: err}
	}
	return nil
}

// recordCanary writes the canary's start or pass through the schema's
// replay_canary_record function: a resumed run trusts these rows (a pass
// skips the canary), so only the request's runner may write them.
func recordCanary(ctx context.Context, r *Runner, request int64, passed bool, details map[string]any) error {
	_, err := r.Pool.Exec(ctx, `SELECT expiryctl.replay_canary_record($1, $2, $3, $4)`, r.Actor, request, passed, details)
	return asRefusal(err)
}

// finish stops the pipeline and settles the request: completed, halted, or
// left running for a resume.
func (x *replayRun) finish(ctx context.Context, stop *stopReason) error {
	r, st := x.r, x.st
	r.report(st, "stopping")
	// Nothing more goes out; what is in flight gets its answer.
	x.drain(30 * time.Second)
	x.stopProber()
	close(x.prep.want)
	for b := range x.prep.out {
		if b.err == nil && b.halt == nil && b.stopped == "" && !b.last {
			for _, m := range b.msgs {
				if !b.wasPublishing[m.Item] {
					x.unsent[m.Item] = true
				}
			}
			// Skips and failures of a late batch are committed: count them.
			st.skipped += len(b.skipped)
			for _, f := range b.failed {
				st.failed++
				st.failedItems = append(st.failedItems, f)
			}
		}
	}
	recErr := x.rec.close()
	unsent := make([]int64, 0, len(x.unsent))
	for id := range x.unsent {
		unsent = append(unsent, id)
	}

	if stop == nil && x.lost != nil {
		stop = &stopReason{err: x.lost}
	}
	var refusal *Refusal
	if recErr != nil && errors.As(recErr, &refusal) {
		// The request stopped running under the recorder: a cancel.
		stop = &stopReason{stopped: StatusCancelled}
	} else if recErr != nil && (stop == nil || stop.err == nil) {
		stop = &stopReason{err: recErr}
	}

	switch {
	case stop != nil && stop.stopped != "":
		x.recordUnrecorded(ctx)
		return r.stopped(ctx, st, stop.stopped)
	case stop != nil && stop.halt != nil:
		return r.halt(ctx, st, stop.halt, unsent, nil)
	case stop != nil && stop.err != nil:
		return r.interrupt(ctx, st, stop.err, unsent, x.lostCount)
	}
	// Everything is out: a last look at the stop conditions, with no
	// minimum number of publishes, then done.
	if h := x.failureHalt(1); h != nil {
		return r.halt(ctx, st, h, nil, nil)
	}
	if h, err := x.redeadHalt(ctx); err != nil {
		return r.interrupt(ctx, st, err, nil, 0)
	} else if h != nil {
		return r.halt(ctx, st, h, nil, nil)
	}
	return r.complete(ctx, st)
}

// recordUnrecorded handles items the broker acked after the request was
// cancelled under the runner: the database no longer lets them be marked
// confirmed, but their letters were replayed, and the trail must say so.
func (x *replayRun) recordUnrecorded(ctx context.Context) {
	var acked []int64
	for _, o := range x.rec.unrecorded {
		if !o.failed {
			acked = append(acked, o.id)
		}
	}
	if len(acked) == 0 {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = x.r.Pool.Exec(bg, `SELECT expiryctl.replay_run_acked_after_cancel($1, $2, $3)`, x.r.Actor, x.st.req.ID, acked)
}
