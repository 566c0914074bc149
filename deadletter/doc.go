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
// ingest_letters and purge_letters (store/functions/ingest_letters.sql and
// purge_letters.sql there); its current shape, triggers and grants are in
// store/schema.sql. A change to the table is a new migration, never an edit
// of a released one; a change to a function edits its file (the package
// doc of store gives the rules).
package deadletter
