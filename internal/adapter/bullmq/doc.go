// Package bullmq is expiryctl's BullMQ driver: naming a queue on Redis
// (Ref: bullmq://CONNECTION/PREFIX/QUEUE as letters name it, or
// bullmq://HOST:PORT/DB/QUEUE?prefix=… typed on the command line), capturing the jobs in its
// failed set without changing Redis (Source, a deadletter.Source), and
// retrying a captured job where it is, with BullMQ's own retry semantics,
// for the replay runner (Retrier, a replay.Broker). It reads and writes
// BullMQ 5's key layout (SupportedVersion) and refuses a queue whose meta
// names another. The domain packages own the interfaces and do not import
// this package.
package bullmq
