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
