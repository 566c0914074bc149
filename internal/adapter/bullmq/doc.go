// Package bullmq is expiryctl's BullMQ driver: naming a queue on Redis
// (Ref: bullmq://CONNECTION/PREFIX/QUEUE as letters name it, or
// bullmq://HOST:PORT/DB/QUEUE?prefix=… typed on the command line), capturing the jobs in its
// failed set without changing Redis (Source, a deadletter.Source), and
// retrying a captured job where it is, with BullMQ's own retry semantics,
// for the replay runner (Retrier, a replay.Broker). It reads and writes
// the key layouts of BullMQ 5 and 6 (SupportedVersion), each as the
// queue's meta names it, and refuses a queue whose meta names another; a
// queue missing under its prefix is refused with the prefixes that hold a
// queue of its name (QueueNotFoundError). The domain packages own the
// interfaces and do not import this package.
package bullmq
