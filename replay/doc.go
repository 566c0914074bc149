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
package replay
