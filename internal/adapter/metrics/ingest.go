package metrics

import (
	"maps"
	"slices"
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
	ingestLossesDesc = newDesc("ingest_connection_losses_total",
		"Times this ingest process (with --follow) lost a server and waited to reconnect, by server: rabbitmq, sqs, river, redis, jobtable or postgresql.",
		"queue", "server")
)

// The server label values of ingest_connection_losses_total, each
// exported from the start so that a rate over it never lacks a series.
const (
	LostRabbitMQ   = "rabbitmq"
	LostSQS        = "sqs"
	LostPostgreSQL = "postgresql"
	// A job store's server: River's database, BullMQ's Redis, a team's
	// jobs table's database (not expiryctl's: that is LostPostgreSQL).
	LostRiver    = "river"
	LostRedis    = "redis"
	LostJobTable = "jobtable"
)

// ingestDescs are the metrics IngestCounters exports.
var ingestDescs = []*prometheus.Desc{ingestLettersDesc, ingestBatchesDesc, ingestLossesDesc}

// IngestCounters is a prometheus.Collector of what one ingest process
// captured from one queue. Observe is given the run's running totals after
// each committed batch, so the counters are exact whatever the scrape
// interval.
type IngestCounters struct {
	queue string

	mu                          sync.Mutex
	stored, duplicates, batches int64
	// lost counts the losses by server label.
	lost map[string]int64
}

// NewIngestCounters returns counters, all zero, for ingesting queue.
func NewIngestCounters(queue string) *IngestCounters {
	return &IngestCounters{queue: queue, lost: make(map[string]int64, len(lostServers))}
}

// Observe records the run's totals so far.
func (c *IngestCounters) Observe(stored, duplicates, batches int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stored, c.duplicates, c.batches = stored, duplicates, batches
}

// lostServers are the server labels, in the order they are exported.
var lostServers = []string{LostRabbitMQ, LostSQS, LostPostgreSQL, LostRiver, LostRedis, LostJobTable}

// Lost counts one loss of server (one of the Lost… labels): the first wait of an outage, however many tries it
// then takes.
func (c *IngestCounters) Lost(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(lostServers, server) {
		c.lost[server]++
	}
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
	lost := maps.Clone(c.lost)
	c.mu.Unlock()
	ch <- counter(ingestLettersDesc, float64(stored), c.queue, "stored")
	ch <- counter(ingestLettersDesc, float64(duplicates), c.queue, "duplicate")
	ch <- counter(ingestBatchesDesc, float64(batches), c.queue)
	for _, server := range lostServers {
		ch <- counter(ingestLossesDesc, float64(lost[server]), c.queue, server)
	}
}
