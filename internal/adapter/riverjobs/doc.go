// Package riverjobs is expiryctl's River driver: naming a River queue in a
// PostgreSQL database of its own (Ref: river://CONNECTION/QUEUE as letters
// name it, the connection's server and login from the operator's
// configuration, or river://USER@HOST:PORT/DATABASE/QUEUE typed on the
// command line),
// the capture of the jobs River discarded (or cancelled) there (Source, a
// deadletter.Source that reads river_job in read-only transactions and
// never changes it), and the replay target that retries a captured job in
// place through River's own JobRetryTx (Retrier, a replay.Broker), only
// while River still holds the failure the letter captured. The domain
// packages own the interfaces and do not import this package. What the
// capture and the retry do as every PostgreSQL-backed job store does is
// package pgjobs's: this driver gives it its statements and rows.
package riverjobs
