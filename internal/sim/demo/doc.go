// Package demo stages a realistic reservation-expiry incident on the local
// services, so that `expiryctl dlq ingest` and the triage views have
// something true to show: the reference worker processes a mix of healthy
// and broken jobs, rides out a database outage until its attempt budget runs
// out, and both the worker and RabbitMQ itself dead-letter what cannot be
// processed.
//
// The demo only produces dead letters; it never ingests them, so what the
// operator sees afterwards is exactly what a real DLQ would hold.
package demo
