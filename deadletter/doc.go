// Package deadletter is the archive of dead-lettered reservation-expiry jobs:
// it parses what arrives on a dead-letter queue (both the worker's headers and
// RabbitMQ's own x-death), classifies it into the triage reason categories,
// ingests it into PostgreSQL with at-least-once capture and deduplication, and
// answers the triage queries (summary, list, show).
//
// Nothing that arrives is dropped: a payload or header that cannot be
// understood is stored exactly as received and classified "malformed" or
// "unknown".
//
// The archive is the table dead_letters (with its per-category counts in
// dead_letter_tallies), written only through the schema's functions
// ingest_letters and purge_letters; its current shape, triggers and grants
// are in store/schema.sql. A change to it is a new
// migration there, never an edit of a released one (the package doc of
// store gives the rules).
package deadletter
