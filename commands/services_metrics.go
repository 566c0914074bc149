package commands

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/expiryctl/expiryctl/audit"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
	"github.com/expiryctl/expiryctl/store"
)

// MetricsSource returns the numbers `metrics serve` and `dlq ingest
// --metrics-listen` export, for the topology of workQueue. Its reads write
// no audit row each, since they repeat on a timer: the command records one
// (metrics.serve) when it starts, as the terminal UI does when it opens.
func (f *Factory) MetricsSource(ctx context.Context, workQueue string) (metrics.Source, error) {
	s, err := f.services(ctx)
	if err != nil {
		return nil, err
	}
	queues, err := f.LiveQueues(ctx)
	if err != nil {
		return nil, err
	}
	return &metricsSource{archive: s.archive().WithoutListingAudit(), replay: &replay.Tallier{Service: s.requests()}, queues: queues, workQueue: workQueue,
		cover: func(ctx context.Context) (audit.CoverStatus, error) { return audit.Cover(ctx, s.pool) }, holds: s.holdsGap}, nil
}

// replayTally is what the metrics read of replay: counts only, neither
// written nor audited.
type replayTally interface {
	CountOpen(ctx context.Context) (map[replay.Status]int, error)
	Tally(ctx context.Context) (replay.Tally, error)
}

// metricsSource is metrics.Source over the archive, the replay requests
// and the live queues.
type metricsSource struct {
	archive   service.Archive
	replay    replayTally
	queues    service.LiveQueues // nil: the live queues are not read
	workQueue string
	// cover reads how far the newest checkpoint covers the audit trail;
	// nil: it is not read.
	cover func(context.Context) (audit.CoverStatus, error)
	// holds reads the holds past their deadline in the reservation
	// database; nil: they are not read.
	holds service.HoldsGap
}

func (m *metricsSource) Snapshot(ctx context.Context) (metrics.Snapshot, error) {
	var snap metrics.Snapshot
	// The reservation database is read while expiryctl's answers: the
	// slower of the two sets the snapshot's time, and a reservation
	// database that hangs up to its bound (replay.GapDeadline) leaves the
	// rest of the snapshot whole instead of eating its deadline.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a snapshot that fails early leaves no read behind
	var holds chan holdsAnswer
	if m.holds != nil {
		holds = make(chan holdsAnswer, 1)
		go func() {
			g, err := m.holds(ctx)
			holds <- holdsAnswer{g, err}
		}()
	}
	// One read of the archive's signals, over the whole archive (tallies
	// and indexes: cheap on a million letters), gives the categories, the
	// overdue holds and the error classes. The archive is the quiet one, so
	// a reading writes no audit row.
	signals, err := m.archive.Signals(ctx, deadletter.SignalsOptions{})
	if err != nil {
		return snap, err
	}
	snap.Categories, snap.Overdue, snap.ErrorClasses = archiveMetrics(signals)

	if snap.Replay, err = m.replayState(ctx); err != nil {
		return snap, err
	}
	if m.cover != nil {
		c, err := m.cover(ctx)
		var refusal *store.Refusal
		switch {
		case errors.As(store.AsRefusal(err), &refusal):
			// A capture's ingester login does not read the trail.
			snap.Missing = append(snap.Missing, "audit: this login cannot read the audit trail ("+refusal.Message+")")
		case err != nil:
			return snap, err
		default:
			snap.Audit = &metrics.AuditCover{Rows: c.Rows, Checkpointed: c.Checkpointed, NewestCheckpoint: c.NewestCheckpoint}
		}
	}

	if m.queues == nil {
		snap.Missing = append(snap.Missing, "live queues: no reader of RabbitMQ's management API was given")
	} else {
		report, err := m.queues.Topology(ctx, m.workQueue)
		if err != nil {
			report = deadletter.QueueReport{Unavailable: err.Error()}
		}
		snap.Queues = metricsQueues(report)
		if report.Unavailable != "" {
			snap.Missing = append(snap.Missing, "live queues: "+report.Unavailable)
		}
	}

	if holds != nil {
		// A reservation database that cannot answer is no failed snapshot:
		// its gauge says so, and the alert on it fires.
		h := <-holds
		switch {
		case errors.Is(h.err, replay.ErrNoGapQuery):
		case h.err != nil:
			snap.Holds = &metrics.HoldsAtSource{}
			snap.Missing = append(snap.Missing, "holds at source: "+dsn.RedactText(h.err.Error()))
		default:
			snap.Holds = &metrics.HoldsAtSource{Up: true, PastDeadline: h.gap.PastDeadline, OldestLate: h.gap.OldestLate()}
		}
	}
	return snap, nil
}

// holdsAnswer is the gap query's answer, read beside the snapshot's other
// reads.
type holdsAnswer struct {
	gap replay.HoldsGap
	err error
}

// archiveMetrics are the archive's signals as the metrics count them: the
// letters per category, the overdue holds (letters past due_at, neither
// replayed nor discarded) and the waiting letters per error class.
func archiveMetrics(signals deadletter.Signals) ([]metrics.CategoryLetters, *metrics.OverdueHolds, *metrics.ClassCounts) {
	var categories []metrics.CategoryLetters
	for _, c := range signals.Categories {
		line := metrics.CategoryLetters{Category: string(c.Category), Waiting: c.Count, Ingested: c.Total, ByStatus: map[string]int64{}}
		for status, n := range c.ByStatus {
			line.ByStatus[string(status)] = n
		}
		if c.OldestDeadLetteredAt != nil {
			line.OldestWaiting = *c.OldestDeadLetteredAt
		}
		categories = append(categories, line)
	}
	overdue := &metrics.OverdueHolds{Count: signals.Overdue.Count}
	for _, c := range signals.Overdue.ByCategory {
		overdue.ByCategory = append(overdue.ByCategory, metrics.OverdueCategory{Category: string(c.Category), Permanent: c.Permanent, Count: c.Count})
	}
	for _, p := range []struct {
		from *deadletter.Seconds
		to   *time.Duration
	}{{signals.Overdue.LatenessP50, &overdue.P50}, {signals.Overdue.LatenessP99, &overdue.P99}, {signals.Overdue.LatenessMax, &overdue.Max}} {
		if p.from != nil {
			*p.to = p.from.Duration()
		}
	}
	classes := &metrics.ClassCounts{Waiting: map[string]int64{}}
	for _, c := range signals.ErrorClasses {
		classes.Waiting[c.ErrorClass] += c.Count
	}
	return categories, overdue, classes
}

// replayState counts the open requests by status, every open status
// present (a zero says "none halted", which an alert needs to resolve),
// and their items by state.
func (m *metricsSource) replayState(ctx context.Context) (*metrics.ReplayState, error) {
	open, err := m.replay.CountOpen(ctx)
	if err != nil {
		return nil, err
	}
	tally, err := m.replay.Tally(ctx)
	if err != nil {
		return nil, err
	}
	st := &metrics.ReplayState{Requests: map[string]int64{}, Items: map[string]map[string]int64{}, Published: tally.Published,
		Halts: map[string]int64{}}
	// Every condition the runner halts on is present, a zero for none yet,
	// so that increase() sees the first halt of each.
	for _, condition := range replay.HaltConditions() {
		st.Halts[condition] = 0
	}
	for condition, n := range tally.Halts {
		st.Halts[condition] += n
	}
	for _, status := range replay.Statuses() {
		if (replay.Request{Status: status}).Open() {
			st.Requests[string(status)] = int64(open[status])
		}
	}
	for status, states := range tally.Open {
		st.Items[string(status)] = states
	}
	for id, r := range tally.Requests {
		items := metrics.RequestItems{ID: id, Status: string(r.Status), States: r.States}
		if f := r.Fates; f != nil {
			items.Outcomes = map[string]int64{"came_back": int64(f.CameBack), "settled": int64(f.Settled), "unknown": int64(f.Unknown)}
		}
		st.OpenRequests = append(st.OpenRequests, items)
	}
	slices.SortFunc(st.OpenRequests, func(a, b metrics.RequestItems) int { return cmp.Compare(b.ID, a.ID) })
	return st, nil
}

// metricsQueues converts the broker's report, in the topology's order.
func metricsQueues(report deadletter.QueueReport) *metrics.LiveQueues {
	q := &metrics.LiveQueues{Unavailable: report.Unavailable}
	for _, s := range report.Queues {
		q.Queues = append(q.Queues, metrics.QueueState{
			Name: s.Name, Role: string(s.Role), Ready: s.Ready, Unacked: s.Unacked, Consumers: s.Consumers, ConsumersUnseen: s.ConsumersUnseen,
			PublishRate: s.PublishRate, DeliverRate: s.DeliverRate, AckRate: s.AckRate, HeadAge: s.HeadAge,
			HeadAgeEstimated: s.HeadAgeEstimated,
		})
	}
	return q
}
