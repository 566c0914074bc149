package worker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The error classes the worker writes into x-error-class. They are part of the
// message contract: expiryctl's classifier maps them to reason categories, so
// a class, once shipped, keeps its spelling.
const (
	// ClassValidation means the body is JSON but lacks a required field or holds
	// one of the wrong type. Permanent.
	ClassValidation = "validation"
	// ClassMalformed means the body is not a JSON object. The worker rejects such a
	// delivery rather than dead-lettering it itself, so this class never
	// appears in a header; it exists for DecodeJob's error.
	ClassMalformed = "malformed"
	// ClassNotFound means no reservation has the job's id. Permanent.
	ClassNotFound = "not_found"
	// ClassVersionConflict means the reservation is still held but at another
	// version than the job expected, so the hold was changed after the job
	// was issued. Permanent: replaying it cannot succeed.
	ClassVersionConflict = "version_conflict"
	// ClassDBTimeout means the database timed out or the connection failed.
	// Transient.
	ClassDBTimeout = "db_timeout"
	// ClassDeadlock means PostgreSQL broke a deadlock by aborting this
	// transaction. Transient.
	ClassDeadlock = "deadlock"
	// ClassSerialization means a serialization failure. Transient.
	ClassSerialization = "serialization_failure"
	// ClassLockTimeout means a row lock was not granted in time. Transient.
	ClassLockTimeout = "lock_timeout"
	// ClassThrottled means a service the job depends on asked to be called
	// later (HTTP 429, or a database's load shedding). Transient; the
	// error's RetryAfter, when set, is the least wait before the retry.
	ClassThrottled = "throttled"
	// ClassDBError means any other database error. Transient, because a worker
	// cannot tell a misconfigured database from a passing fault, and the
	// attempt budget bounds the cost of guessing wrong.
	ClassDBError = "db_error"
)

// JobError is why a job failed: a stable class for x-error-class, whether
// retrying can help, and the underlying error for x-last-error.
type JobError struct {
	// Class is the short stable name written to x-error-class.
	Class string
	// Permanent means retrying the same job cannot succeed, so it is
	// dead-lettered at once instead of spending the attempt budget.
	Permanent bool
	// Err is the cause; its text becomes x-last-error.
	Err error
	// RetryAfter is how long the failed service asked to be left alone (a
	// Retry-After); the retry waits at least that long, and a dead letter
	// carries it as x-retry-after, in seconds, for a replay to respect.
	RetryAfter time.Duration
}

// Error returns the class and the cause, as logs want them; headers carry
// the two apart.
func (e *JobError) Error() string {
	if e.Err == nil {
		return e.Class
	}
	return e.Class + ": " + e.Err.Error()
}

// Unwrap returns the cause, so errors.Is can see a context deadline or a
// driver error through the classification.
func (e *JobError) Unwrap() error { return e.Err }

func permanent(class, format string, args ...any) *JobError {
	return &JobError{Class: class, Permanent: true, Err: fmt.Errorf(format, args...)}
}

// classify turns any error from processing a job into a *JobError. An error
// that says nothing of its nature is treated as transient: a retry costs
// little and the budget caps it, while a wrong "permanent" would dead-letter a
// job that the next attempt would have processed.
func classify(err error) *JobError {
	var jobErr *JobError
	if errors.As(err, &jobErr) {
		return jobErr
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "40P01":
			return &JobError{Class: ClassDeadlock, Err: err}
		case code == "40001":
			return &JobError{Class: ClassSerialization, Err: err}
		case code == "55P03":
			return &JobError{Class: ClassLockTimeout, Err: err}
		case code == "57014", strings.HasPrefix(code, "08"), // statement timeout; connection exceptions
			code == "57P01", code == "57P02", code == "57P03", // shutdown, crash, cannot connect now
			code == "53300": // too many connections
			return &JobError{Class: ClassDBTimeout, Err: err}
		default:
			return &JobError{Class: ClassDBError, Err: err}
		}
	}
	// Deadlines, refused or reset connections, a closed pool: pgx reports
	// them as plain errors, and all mean the database could not be used.
	return &JobError{Class: ClassDBTimeout, Err: err}
}
