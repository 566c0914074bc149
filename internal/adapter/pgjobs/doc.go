// Package pgjobs is the machinery PostgreSQL-backed job stores share: what
// the River and pg-boss drivers (riverjobs, pgboss) and the jobs-table
// driver's capture (jobtable) do the same way whatever the system, with
// each system's statements and rows fed in by its driver.
//
// An Endpoint is the database and login a reference reaches, read from a
// URL typed on the command line or a configured connection (endpoint.go);
// Connect opens a driver's pool on it and reads its login's standing
// (database.go). A Poller captures one queue's failed jobs in the order
// they failed, looking back for those committed late, on read-only
// sessions (poller.go); a Feed is its delivering half, the prefetch, the
// tags, the polling rounds and the backoff through a lost database
// (feed.go), which jobtable's Source runs on too. Retries are a
// replay.Broker's publishes as transactions that lock the job, confirm
// the retry an earlier publish made, skip a job that moved on and write
// the retry with the replay's marks (retries.go), which capture reads
// back (marks.go). The domain packages own the interfaces and do not
// import this package.
package pgjobs
