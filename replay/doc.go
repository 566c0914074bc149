// Package replay puts dead letters back on the queue only through a governed
// request: a frozen cohort (one letter or a bounded set), approved by a second
// person under the policy in the database, run once under a rate ceiling with
// publisher confirms, a canary and stop conditions, keeping each job's
// identity. Discards go through the same approval.
//
// The rules that matter are enforced by PostgreSQL: the schema's functions
// (replay_request_create, replay_review, replay_run_start, …), each in its
// file under store/functions/, and the triggers on replay_requests and
// replay_items. Those tables, policy and policy_changes are in
// store/schema.sql as they stand, with the triggers and grants. This
// package states the rules again in Go only to explain refusals early and
// clearly. Every action writes an audit row in the same transaction. A
// change to the tables is a new migration, never an edit of a released
// one; a change to a function edits its file (the package doc of store
// gives the rules).
//
// All of the package's SQL is in postgres*.go, behind the tables interface
// (tables.go): one method per operation on its tables and per call of the
// schema's functions. The runner is in run*.go, one file per part: run.go
// (Run, its state, discards), run_lock.go (the single-runner lease) and
// runner_held.go (whether a running request has lost its runner),
// run_items.go (an item and its letter), run_planner.go (what to do with
// each item), run_message.go (what every replayed message carries: the
// replay's marks, a fresh key, its letter's bookkeeping cut out; the
// driver of its system encodes the rest, publish.go's Encoder),
// run_preparer.go (marking chunks publishing ahead of the publisher),
// run_clear.go and publish_bound.go (clearing each publish in the database
// just before it, which bounds an item's copies to PublishBound),
// run_loop.go (publishing under the rate ceiling and the confirm window),
// run_pace.go (lowering the rate while the target's consumers fall
// behind), run_recorder.go (writing the broker's answers), run_prober.go
// (reading the stop conditions' numbers), run_halts.go and run_canary.go
// (the stop conditions and the canary, as plain functions), run_readings.go
// (the stop conditions as last judged, for progress), run_outcomes.go
// (watching each reservation reach its terminal state), run_dlq_watch.go
// (capturing the cohort's dead-letter queues, to see its jobs die again),
// fates.go (what became of the confirmed items), run_eta.go (the time
// a run spends waiting by design), run_end.go (settling the request),
// run_failover.go (going on through another broker node after losing one)
// and run_dry.go (a dry run).
package replay
