// Package metrics exposes expiryctl's incident signals to Prometheus: the
// dead letters waiting and arriving, how late the overdue holds are, what
// the live queues hold and how the replays stand, in the text format a
// Prometheus server scrapes (`expiryctl metrics serve`, and `dlq ingest
// --follow --metrics-listen`).
//
// The numbers come from a Source, which the commands build over the
// domain's services; this package knows nothing of SQL or AMQP. An
// Exporter takes a Snapshot from its Source on an interval, in the
// background, and answers every scrape from the last one: a scrape never
// reaches the database, so its cost does not grow with the archive, and
// the snapshot's age and failures are metrics of their own. A signal the
// Source could not read is left out, never exported as zero: a zero would
// look like good news. docs/metrics.md lists every metric.
package metrics
