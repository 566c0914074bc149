package metrics

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-retry"
)

// DefaultInterval is how often an Exporter takes a snapshot unless told
// otherwise: a Prometheus server's usual scrape interval.
const DefaultInterval = 15 * time.Second

// DefaultMaxClasses is how many error classes are exported by name unless
// told otherwise.
const DefaultMaxClasses = 10

// maxRequestSeries bounds the open requests exported by id: open requests
// are few, and a backlog of forgotten pending ones must not make a
// thousand series.
const maxRequestSeries = 50

// maxClassBytes bounds an error class's label value: the class comes from a
// message, and a label is for grouping, not for reading an error.
const maxClassBytes = 64

// Options tune an Exporter. Zero values take the defaults.
type Options struct {
	// Interval is how often the snapshot is refreshed (DefaultInterval).
	Interval time.Duration
	// MaxClasses is how many error classes are exported by name, the most
	// frequent first; the others are summed as "other" (DefaultMaxClasses).
	MaxClasses int
	// Now is the clock (time.Now).
	Now func() time.Time
	// Retry gives a fresh schedule of waits for each run of failed
	// refreshes, so that a server back from a restart is read again
	// within a second rather than an interval later; no wait is longer
	// than Interval. Nil: every refresh waits Interval.
	Retry func() retry.Backoff
}

// Exporter is a prometheus.Collector that serves the last Snapshot of its
// Source. Refresh and Run take snapshots; Collect, which a scrape calls,
// only reads the one kept, so a scrape costs the same whatever the
// archive's size and never waits for the database.
type Exporter struct {
	source Source
	opts   Options

	mu sync.Mutex
	// snap is the last successful snapshot, taken at taken in took; valid
	// once taken is set.
	snap      Snapshot
	taken     time.Time
	took      time.Duration
	successes int64
	failures  int64
}

// NewExporter returns an Exporter over source. It holds no snapshot until
// Refresh or Run takes one; until then it exports only its own metrics.
func NewExporter(source Source, opts Options) *Exporter {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxClasses <= 0 {
		opts.MaxClasses = DefaultMaxClasses
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Exporter{source: source, opts: opts}
}

// Refresh takes a snapshot now and keeps it. A failed snapshot is counted
// and returned; the previous one is kept and served, growing older.
func (e *Exporter) Refresh(ctx context.Context) (Snapshot, error) {
	// A snapshot that takes longer than the interval would pile up behind
	// itself; one that hangs on a stuck database must end.
	ctx, cancel := context.WithTimeout(ctx, max(e.opts.Interval, 10*time.Second))
	defer cancel()
	start := e.opts.Now()
	snap, err := e.source.Snapshot(ctx)
	took := e.opts.Now().Sub(start)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.failures++
		return Snapshot{}, err
	}
	e.snap, e.taken, e.took = snap, start, took
	e.successes++
	return snap, nil
}

// Run refreshes the snapshot every interval until ctx is done; after a
// failed refresh it tries again on the Retry schedule. report, when not
// nil, is called after each refresh with its error (nil on success) and
// the wait before the next, so that the caller can say when the snapshots
// start and stop failing and when it tries again.
func (e *Exporter) Run(ctx context.Context, report func(err error, next time.Duration)) {
	wait := e.opts.Interval
	var retries retry.Backoff
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		_, err := e.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		wait = e.opts.Interval
		switch {
		case err == nil:
			retries = nil
		case e.opts.Retry != nil:
			if retries == nil {
				retries = e.opts.Retry()
			}
			next, _ := retries.Next()
			wait = min(next, e.opts.Interval)
		}
		if report != nil {
			report(err, wait)
		}
	}
}

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range exporterDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it exports the kept snapshot.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	snap, taken, took, successes, failures := e.snap, e.taken, e.took, e.successes, e.failures
	e.mu.Unlock()
	now := e.opts.Now()

	ch <- counter(snapshotsDesc, float64(successes))
	ch <- counter(snapshotErrorsDesc, float64(failures))
	if taken.IsZero() {
		return
	}
	ch <- gauge(snapshotAgeDesc, now.Sub(taken).Seconds())
	ch <- gauge(snapshotDurationDesc, took.Seconds())

	for _, c := range snap.Categories {
		ch <- gauge(waitingDesc, float64(c.Waiting), c.Category)
		ch <- counter(ingestedDesc, float64(c.Ingested), c.Category)
		for status, n := range c.ByStatus {
			ch <- gauge(byStatusDesc, float64(n), c.Category, status)
		}
		if !c.OldestWaiting.IsZero() {
			// The oldest letter stays the oldest until it is decided, so
			// its age is computed at the scrape, not frozen at the snapshot.
			ch <- gauge(oldestDesc, max(now.Sub(c.OldestWaiting).Seconds(), 0), c.Category)
		}
	}

	ch <- available("error_classes", snap.ErrorClasses != nil)
	if snap.ErrorClasses != nil {
		for _, c := range topClasses(snap.ErrorClasses.Waiting, e.opts.MaxClasses) {
			ch <- gauge(classesDesc, float64(c.n), c.class)
		}
	}

	ch <- available("overdue_holds", snap.Overdue != nil)
	if o := snap.Overdue; o != nil {
		ch <- gauge(overdueDesc, float64(o.Count))
		// With no overdue hold there is no lateness to rank: absent, as a
		// summary's quantiles are when it has observed nothing.
		if o.Count > 0 {
			ch <- gauge(latenessDesc, o.P50.Seconds(), "p50")
			ch <- gauge(latenessDesc, o.P99.Seconds(), "p99")
			ch <- gauge(latenessDesc, o.Max.Seconds(), "max")
		}
		for _, c := range o.ByCategory {
			ch <- gauge(overdueByCategoryDesc, float64(c.Count), c.Category, strconv.FormatBool(c.Permanent))
		}
	}

	ch <- available("holds_at_source", snap.Holds != nil && snap.Holds.Up)
	if h := snap.Holds; h != nil {
		up := 0.0
		if h.Up {
			up = 1
			ch <- gauge(holdsPastDesc, float64(h.PastDeadline))
			ch <- gauge(holdsLateDesc, h.OldestLate.Seconds())
		}
		ch <- gauge(holdsUpDesc, up)
	}

	ch <- available("live_queues", snap.Queues != nil && snap.Queues.Unavailable == "")
	if q := snap.Queues; q != nil {
		up := 0.0
		if q.Unavailable == "" {
			up = 1
		}
		ch <- gauge(managementUpDesc, up)
		for _, s := range q.Queues {
			ch <- gauge(readyDesc, float64(s.Ready), s.Name, s.Role)
			ch <- gauge(unackedDesc, float64(s.Unacked), s.Name, s.Role)
			if !s.ConsumersUnseen {
				ch <- gauge(consumersDesc, float64(s.Consumers), s.Name, s.Role)
			}
			switch {
			case s.HeadAge != nil && s.HeadAgeEstimated:
				ch <- gauge(headAgeEstimatedDesc, s.HeadAge.Seconds(), s.Name, s.Role)
			case s.HeadAge != nil:
				ch <- gauge(headAgeDesc, s.HeadAge.Seconds(), s.Name, s.Role)
			}
			for _, r := range []struct {
				op   string
				rate *float64
			}{{"publish", s.PublishRate}, {"deliver", s.DeliverRate}, {"ack", s.AckRate}} {
				if r.rate != nil {
					ch <- gauge(rateDesc, *r.rate, s.Name, s.Role, r.op)
				}
			}
		}
	}

	ch <- available("replay", snap.Replay != nil)
	if r := snap.Replay; r != nil {
		for status, n := range r.Requests {
			ch <- gauge(requestsDesc, float64(n), status)
		}
		for status, states := range r.Items {
			for state, n := range states {
				ch <- gauge(itemsDesc, float64(n), status, state)
			}
		}
		for i, req := range r.OpenRequests {
			if i == maxRequestSeries {
				break
			}
			id := strconv.FormatInt(req.ID, 10)
			for state, n := range req.States {
				ch <- gauge(requestItemsDesc, float64(n), id, req.Status, state)
			}
			for fate, n := range req.Outcomes {
				ch <- gauge(requestOutcomesDesc, float64(n), id, req.Status, fate)
			}
		}
		ch <- counter(publishedDesc, float64(r.Published))
		for condition, n := range r.Halts {
			ch <- counter(haltsDesc, float64(n), condition)
		}
	}

	ch <- available("audit", snap.Audit != nil)
	if a := snap.Audit; a != nil {
		ch <- gauge(auditRowsDesc, float64(a.Rows))
		ch <- gauge(auditCheckpointedDesc, float64(a.Checkpointed))
		at := 0.0
		if !a.NewestCheckpoint.IsZero() {
			at = float64(a.NewestCheckpoint.UnixMilli()) / 1000
		}
		ch <- gauge(auditCheckpointTimeDesc, at)
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func available(signal string, ok bool) prometheus.Metric {
	v := 0.0
	if ok {
		v = 1
	}
	return gauge(availableDesc, v, signal)
}

type classCount struct {
	class string
	n     int64
}

// topClasses keeps the series bounded whatever the messages say: the
// limit most frequent classes by name (ties by name, so the set is stable
// between scrapes), the rest summed as "other". A class is cut to
// maxClassBytes, and letters with none are "none".
func topClasses(waiting map[string]int64, limit int) []classCount {
	merged := map[string]int64{}
	for class, n := range waiting {
		merged[classLabel(class)] += n
	}
	all := make([]classCount, 0, len(merged))
	for class, n := range merged {
		all = append(all, classCount{class, n})
	}
	slices.SortFunc(all, func(a, b classCount) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.class, b.class))
	})
	if len(all) <= limit {
		return all
	}
	other := classCount{class: "other"}
	kept := make([]classCount, 0, limit+1)
	for _, c := range all {
		if len(kept) < limit && c.class != "other" {
			kept = append(kept, c)
			continue
		}
		other.n += c.n
	}
	return append(kept, other)
}

func classLabel(class string) string {
	if class == "" {
		return "none"
	}
	if len(class) <= maxClassBytes {
		return class
	}
	cut := maxClassBytes
	for cut > 0 && !utf8.RuneStart(class[cut]) {
		cut--
	}
	return class[:cut]
}
