// Package worker is the reference reservation-expiry worker: the consumer the
// message contract (docs/message-contract.md) describes, used by `expiryctl
// demo` and by end-to-end tests so that expiryctl is exercised against dead
// letters made the way production makes them.
//
// A job moves one reservation from held to expired, exactly once per
// idempotency key and only once its hold has run out by the database's
// clock, in one PostgreSQL transaction (ExpireOnce). A job that comes early,
// or before its not_before, waits in a retry queue until then. Run consumes
// jobs from RabbitMQ and acks a delivery only after its transaction committed
// or after the broker confirmed the copy that replaces it: a retry copy on a
// TTL tier queue for a transient failure, or a dead-letter copy carrying
// x-error-class, x-last-error and x-attempt-history for a permanent failure or
// an exhausted attempt budget. A body that is not a JSON object is rejected
// without requeue, so RabbitMQ itself dead-letters it with x-death reason
// "rejected".
//
// The reservations model lives in the schema "reservations", apart from
// expiryctl's own tables: it stands for the application database that
// expiryctl never touches.
package worker
