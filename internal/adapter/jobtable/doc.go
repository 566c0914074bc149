// Package jobtable is expiryctl's driver for a team's own jobs table in
// PostgreSQL (an outbox, or a jobs table with a status column that a
// poller works): a Mapping names the table's columns and states, a
// Source captures the rows in a failed state for deadletter's ingest
// without changing them, and a Retrier (a replay.Broker) replays a
// captured row by setting it runnable again in place, only while it is
// still the failure that was captured. Every statement names the table
// and its columns through the Mapping alone, quoted, and binds every value
// as a parameter; GrantSQL is the least a login needs for both. The domain
// packages own the interfaces and do not import this package.
package jobtable
