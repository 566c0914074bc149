// Package audit writes expiryctl's audit trail: one row per command, reads
// included, naming the actor, the database role they connected as, the
// action, its target, its parameters and its outcome. Callers that change
// state write the row in the same transaction as the change, so the change
// and its record commit together or not at all.
//
// The trail is append-only and tamper-evident: PostgreSQL refuses UPDATE,
// DELETE and TRUNCATE for every client, and numbers and hash-chains each row
// on insert. List, Export and VerifyDB read it back; VerifyFile checks an
// export with no database at all. docs/audit.md specifies the canonical
// encoding so that reviewers can write their own verifier.
//
// The trail is the table audit_log, with audit_trail, audit_tree and
// audit_checkpoints for its Merkle tree and signed checkpoints; their
// current shape, the column defaults and generated hash that chain a row,
// and the triggers that refuse changes are in store/schema.sql; each
// function (audit_append, audit_write, audit_next_seq, …) is in its own
// file under store/functions/. A change to a table is a new migration,
// never an edit of a released one; a change to a function edits its file
// (the package doc of store gives the rules).
package audit
