package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of a `dlq ingest` process, counted in the process itself.
var (
	ingestLettersDesc = newDesc("ingest_letters_total",
		"Letters this ingest process committed since it started, by outcome: stored, or duplicate (a copy already archived, acknowledged and skipped).",
		"queue", "outcome")
	ingestBatchesDesc = newDesc("ingest_batches_total",
		"Batches this ingest process committed and acknowledged since it started.",
		"queue")
)

// ingestDescs are the metrics IngestCounters exports.
var ingestDescs = []*prometheus.Desc{ingestLettersDesc, ingestBatchesDesc}

// IngestCounters is a prometheus.Collector of what one ingest process
// captured from one queue. Observe is given the run's running totals after
// each committed batch, so the counters are exact whatever the scrape
// interval.
type IngestCounters struct {
	queue string

	mu                          sync.Mutex
	stored, duplicates, batches int64
}

// NewIngestCounters returns counters, all zero, for ingesting queue.
func NewIngestCounters(queue string) *IngestCounters {
	return &IngestCounters{queue: queue}
}

// Observe records the run's totals so far.
func (c *IngestCounters) Observe(stored, duplicates, batches int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stored, c.duplicates, c.batches = stored, duplicates, batches
}

// Describe implements prometheus.Collector.
func (c *IngestCounters) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range ingestDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *IngestCounters) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	stored, duplicates, batches := c.stored, c.duplicates, c.batches
	c.mu.Unlock()
	ch <- counter(ingestLettersDesc, float64(stored), c.queue, "stored")
	ch <- counter(ingestLettersDesc, float64(duplicates), c.queue, "duplicate")
	ch <- counter(ingestBatchesDesc, float64(batches), c.queue)
}
