// Package e2e holds expiryctl's end-to-end tests. They run the built binary
// the way an operator does, against a real PostgreSQL and RabbitMQ, and check
// what only a whole process can show: exit codes, what reaches stdout and
// stderr, the audit trail, and that a `kill -9`, a signal or a database
// failure in the middle of `dlq ingest` neither loses nor doubles a letter.
//
// The binary comes from EXPIRYCTL_BIN (`make test` sets it to bin/expiryctl);
// without it the tests build one into a temporary directory first. Each test
// gets its own database (internal/fixture/pgtest) and its own queues
// (internal/fixture/amqptest), so the tests run in parallel with each other and with
// the other packages' tests:
//
//	make build && EXPIRYCTL_BIN=$PWD/bin/expiryctl go test -count=1 ./e2e/
//
// The kill test logs its random seed; EXPIRYCTL_E2E_SEED=<seed> replays the
// same kill delays.
//
// The package has no non-test code; this file only documents it.
package e2e
