// Package replay puts dead letters back on the queue only through a governed
// request: a frozen cohort (one letter or a bounded set), approved by a second
// person under the policy in the database, run once under a rate ceiling with
// publisher confirms, a canary and stop conditions, keeping each job's
// identity. Discards go through the same approval.
//
// The rules that matter are enforced by PostgreSQL (triggers on
// replay_requests and replay_items, see internal/adapter/store/migrations/00003_replay.sql);
// this package states them again in Go only to explain refusals early and
// clearly. Every action writes an audit row in the same transaction.
//
// All of the package's SQL is in postgres*.go, behind the tables interface
// (tables.go): one method per operation on its tables and per call of the
// schema's functions. The runner is in run*.go, one file per part: run.go
// (Run, its state, discards), run_lock.go (the single-runner lock),
// run_items.go (an item and its letter), run_planner.go (what to do with
// each item), run_preparer.go (marking chunks publishing ahead of the
// publisher), run_loop.go (publishing under the rate ceiling and the confirm
// window), run_recorder.go (writing the broker's answers), run_prober.go
// (reading the stop conditions' numbers), run_halts.go and run_canary.go
// (the stop conditions and the canary, as plain functions), run_end.go
// (settling the request) and run_dry.go (a dry run).
package replay
