// Package audit writes expiryctl's audit trail: one row per command, reads
// included, naming the actor, the database role they connected as, the
// action, its target, its parameters and its outcome. Callers that change
// state write the row in the same transaction as the change, so the change
// and its record commit together or not at all.
package audit
