// Package replay puts dead letters back on the queue only through a governed
// request: a frozen cohort (one letter or a bounded set), approved by a second
// person under the policy in the database, run once under a rate ceiling with
// publisher confirms, a canary and stop conditions, keeping each job's
// identity. Discards go through the same approval.
//
// The rules that matter are enforced by PostgreSQL: the schema's functions
// (replay_request_create, replay_review, replay_run_start, …) and the
// triggers on replay_requests and replay_items. Those tables, policy and
// policy_changes are in internal/adapter/store/schema.sql as they stand,
// with the functions, triggers and grants. This package states the rules
// again in Go only to explain refusals early and clearly. Every action
// writes an audit row in the same transaction. A change to the tables is a
// new migration, never an edit of a released one (the package doc of
// internal/adapter/store gives the rules).
package replay
