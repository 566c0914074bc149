// Package deadletter is the archive of dead-lettered reservation-expiry jobs:
// it parses what arrives on a dead-letter queue (both the worker's headers and
// RabbitMQ's own x-death), classifies it into the triage reason categories,
// ingests it into PostgreSQL with at-least-once capture and deduplication, and
// answers the triage queries (summary, list, show).
//
// Nothing that arrives is dropped: a payload or header that cannot be
// understood is stored exactly as received and classified "malformed" or
// "unknown".
package deadletter
