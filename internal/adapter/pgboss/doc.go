// Package pgboss is expiryctl's pg-boss driver (pg-boss, the PostgreSQL
// job queue for Node.js): naming a pg-boss queue in a PostgreSQL database
// of its own (Ref: pgboss://CONNECTION/QUEUE as letters name it, the
// connection's server, login and pg-boss schema from the operator's
// configuration, or pgboss://USER@HOST:PORT/DATABASE/QUEUE?schema=NAME
// typed on the command line), the capture of the jobs pg-boss failed for
// good there (Source, a deadletter.Source that reads pg-boss's job table in
// read-only transactions and never changes it), the replay target that
// retries a captured job in place as pg-boss's own retry(name, id) does
// (Retrier, a replay.Broker), only while pg-boss still holds the failure
// the letter captured, and the queue's live view (Topology). Driver is
// all of it behind the core's seam (driver.JobStore).
//
// pg-boss keeps a failed job where it failed: a row of SCHEMA.job (a table
// partitioned by queue name since pg-boss 10; a queue created with
// partition: true has a partition of its own) in state failed, with the
// error its worker threw as output and the time it gave up as
// completed_on. The driver reads and writes the parent table only, so a
// login needs privileges on SCHEMA.job and SCHEMA.queue alone
// (docs/pgboss.md).
//
// The driver is written against pg-boss 12's schema (12.36.0 or later,
// schema version 44, which added job.trace_context, where a replay writes
// its marks) and tested with pg-boss 12.38.1 (TestedVersion). The domain
// packages own the interfaces and do not import this package. What the
// capture and the retry do as every PostgreSQL-backed job store does is
// package pgjobs's: this driver gives it its statements and rows.
package pgboss
