package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// RolledBackForAnother reports whether err is PostgreSQL rolling a
// transaction back whole to let another one through (a deadlock, a
// serialization failure): nothing of it was stored, so writing it again is
// safe.
func RolledBackForAnother(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// Transient reports whether asking the same thing again later may succeed.
// It is true for an error that is not the server's answer (a lost or
// refused connection, a timeout) and for the server's answers of that kind:
// a connection failure (class 08), a transaction rolled back for another
// (40), a server short of resources (53), shutting down or cancelling
// (57), a system error (58), a lock not available (55P03). Any other answer
// (a refusal, a missing table, a bad value) would be given again.
func Transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch pgErr.Code[:min(2, len(pgErr.Code))] {
	case "08", "40", "53", "57", "58":
		return true
	}
	return pgErr.Code == "55P03"
}

// ServerGone reports whether err says the PostgreSQL server went away
// under a command: it stopped answering, the connection broke (08003,
// 08006 too, as the server reports it), or the server ended the session
// while shutting down or restarting (57P01 admin_shutdown, 57P02
// crash_shutdown, 57P03 cannot_connect_now). A
// command ended so has nothing wrong in what it asked: running it again
// once the server is back is the next step.
func ServerGone(err error) bool {
	if IsNotAnswering(err) || IsLost(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "08003", "08006", "57P01", "57P02", "57P03":
			return true
		}
	}
	return false
}

// Unreachable reports whether err says a PostgreSQL server could not be
// reached, went away, or answered that asking again later may succeed
// (Transient's classes): what a followed capture waits out. An error no
// server gave (a queue that is not there, a refusal of expiryctl's own)
// is not: waiting would not change it.
func Unreachable(err error) bool {
	var pgErr *pgconn.PgError
	return Unavailable(err) || IsNotAnswering(err) || IsLost(err) || errors.As(err, &pgErr) && Transient(err)
}

// Unavailable reports whether err says a PostgreSQL server was not there
// for a command: the connection could not be made (the server did not
// answer, or refused the login) or the server went away under it
// (ServerGone). A job store's database that is unavailable is a command's
// exit 5.
func Unavailable(err error) bool {
	return errors.As(err, new(*pgconn.ConnectError)) || ServerGone(err)
}
