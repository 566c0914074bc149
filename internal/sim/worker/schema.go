package worker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/replay"
)

// Schema is the PostgreSQL schema of the reservations model.
const Schema = "reservations"

// schemaLockID serialises EnsureSchema across processes: CREATE ... IF NOT
// EXISTS is not safe against a concurrent creator of the same object, which
// fails with a unique violation on the catalog ("reservat" in ASCII).
const schemaLockID int64 = 0x7265736572766174

const schemaDDL = `
CREATE SCHEMA IF NOT EXISTS reservations;

CREATE TABLE IF NOT EXISTS reservations.reservations (
	id         text PRIMARY KEY,
	status     text NOT NULL CHECK (status IN ('held', 'expired', 'paid')),
	version    bigint NOT NULL DEFAULT 1 CHECK (version >= 0),
	hold_until timestamptz NOT NULL,
	units      int NOT NULL DEFAULT 1 CHECK (units > 0)
);

CREATE TABLE IF NOT EXISTS reservations.processed_jobs (
	idempotency_key text PRIMARY KEY,
	reservation_id  text NOT NULL,
	processed_at    timestamptz NOT NULL DEFAULT now(),
	outcome         text NOT NULL CHECK (outcome IN ('expired', 'skipped'))
);

CREATE TABLE IF NOT EXISTS reservations.capacity_releases (
	reservation_id  text NOT NULL REFERENCES reservations.reservations (id),
	idempotency_key text NOT NULL UNIQUE,
	units           int NOT NULL CHECK (units > 0),
	released_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS capacity_releases_reservation_idx
	ON reservations.capacity_releases (reservation_id);

-- When the reservation expired, for an outcome query to read how late the
-- transition came (added after the first release, hence ALTER).
ALTER TABLE reservations.reservations ADD COLUMN IF NOT EXISTS expired_at timestamptz;
`

// OutcomeQuery is the policy's outcome query for this model: the one
// `expiryctl policy set --template reservations` proposes (see
// replay.ReservationsOutcomeQuery), which this model's tests hold it to.
var OutcomeQuery = replay.ReservationsOutcomeQuery(Schema)

// EnsureSchema creates the reservations model if it is missing. It is
// idempotent and safe to call from several processes at once.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaDDL)
		return err
	})
	if err != nil {
		return fmt.Errorf("create the %s schema: %w", Schema, err)
	}
	return nil
}
