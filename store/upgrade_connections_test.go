package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/store"
)

// TestUpgradeNamesTheConnectionsOfLettersCapturedBefore migrates an
// archive of 00040, whose job-store letters name their servers
// (river://HOST:PORT/DATABASE/QUEUE, …), to today's schema. Migration 00041
// gives each server the name config.DeriveName gives it, rewrites the
// letters' queue names, their states' and their tallies' to name that
// connection instead, and their fingerprints with them, so that the same
// failed job captured again through a connection of that name is the
// letter already stored, not a second one. RabbitMQ's letters name the
// connection rabbitmq and SQS's sqs.
func TestUpgradeNamesTheConnectionsOfLettersCapturedBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewEmpty(t)
	// Down from today's schema, so that the triggers' functions are of a
	// release that knows 00040's tables, as a database 00040 left has.
	// All but dead_letters_track_state, which holds each letter to its
	// system's row of queue_systems (00042): here, as 00040's did, the
	// letters get their states from the test.
	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateDown(ctx, db.Pool, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE expiryctl.dead_letters DISABLE TRIGGER dead_letters_track_state`); err != nil {
		t.Fatal(err)
	}
	failed := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	job := func(system deadletter.System, queue, id string) deadletter.Letter {
		return deadletter.Parse(deadletter.StoredJob{System: system, Queue: queue, ID: id, Incarnation: failed.Format(time.RFC3339Nano),
			Kind: "expire", Payload: []byte(`{"reservation_id":"r-` + id + `","idempotency_key":"expire:r-` + id + `:v1"}`),
			FailedAt: failed, Attempts: 3, Errors: []deadletter.JobError{{Attempt: 3, At: failed, Error: "db_timeout"}}}.Message(), nil, failed)
	}
	legacy := []struct {
		system                            deadletter.System
		old, authority, database, renamed string
	}{
		{deadletter.System("river"), "river://127.0.0.1:5432/reservations/expiry", "127.0.0.1:5432", "reservations", "/expiry"},
		{deadletter.System("river"), "river://[::1]:5433/jobs%20db/expiry", "[::1]:5433", "jobs%20db", "/expiry"},
		{deadletter.System("bullmq"), "bullmq://redis.internal:6379/2/bull/reservation-expiry", "redis.internal:6379", "2", "/bull/reservation-expiry"},
		{deadletter.System("jobtable"), "jobtable://db.internal:5432/jobs/public.expiry_jobs", "db.internal:5432", "jobs", "/public.expiry_jobs"},
	}
	insert := func(l deadletter.Letter, system deadletter.System, queue string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
				error_class, attempts, payload, payload_sha256, payload_size, dead_lettered_at, source_system, native, headers)
			VALUES ($1, $2, $3, 'transient-exhausted', 'db_timeout', 3, $4, sha256($4), length($4), $5, $6, $7, '{}')`,
			l.Fingerprint[:], l.JobKey, queue, l.Payload, l.DeadLetteredAt, string(system), []byte(l.Native)); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range legacy {
		insert(job(c.system, c.old, fmt.Sprint(i+1)), c.system, c.old)
	}
	// A second letter of the first queue: one name for both.
	insert(job(legacy[0].system, legacy[0].old, "9"), legacy[0].system, legacy[0].old)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letters (fingerprint, job_key, source_queue, reason_category,
			attempts, payload, payload_sha256, payload_size, dead_lettered_at, source_system)
		VALUES (sha256('a'), 'a', 'q.dlq', 'unknown', 1, 'a', sha256('a'), 1, now(), 'rabbitmq'),
		       (sha256('s'), 's', 'arn:aws:sqs:eu-west-1:123456789012:q-dlq', 'unknown', 1, 's', sha256('s'), 1, now(), 'sqs')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO expiryctl.dead_letter_states (dead_letter_id, reason_category, source_queue, error_class,
			attempts, dead_lettered_at, due_at)
		SELECT id, reason_category, source_queue, error_class, attempts, dead_lettered_at, due_at FROM expiryctl.dead_letters ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE expiryctl.dead_letters ENABLE TRIGGER dead_letters_track_state`); err != nil {
		t.Fatal(err)
	}

	if _, err := store.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}

	for i, c := range legacy {
		conn := config.DeriveName(string(c.system), c.authority, c.database)
		queue := string(c.system) + "://" + conn + c.renamed
		want := job(c.system, queue, fmt.Sprint(i+1))
		var gotConn, gotQueue, stateQueue string
		var gotFingerprint []byte
		if err := db.Pool.QueryRow(ctx, `SELECT d.connection, d.source_queue, d.fingerprint, s.source_queue
			FROM expiryctl.dead_letters d JOIN expiryctl.dead_letter_states s ON s.dead_letter_id = d.id WHERE d.job_key = $1`,
			want.JobKey).Scan(&gotConn, &gotQueue, &gotFingerprint, &stateQueue); err != nil {
			t.Fatal(err)
		}
		if gotConn != conn || gotQueue != queue || stateQueue != queue {
			t.Errorf("%s: connection %q, queue %q (state %q); want %q, %q", c.old, gotConn, gotQueue, stateQueue, conn, queue)
		}
		if string(gotFingerprint) != string(want.Fingerprint[:]) {
			t.Errorf("%s: the fingerprint is not the one capture computes for %s: a job captured again would be stored twice", c.old, queue)
		}
		if !config.ValidName(gotConn) {
			t.Errorf("%s: the derived name %q is no connection's name", c.old, gotConn)
		}
	}
	for _, c := range []struct{ queue, conn string }{{"q.dlq", "rabbitmq"}, {"arn:aws:sqs:eu-west-1:123456789012:q-dlq", "sqs"}} {
		var got string
		if err := db.Pool.QueryRow(ctx, `SELECT connection FROM expiryctl.dead_letters WHERE source_queue = $1`, c.queue).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.conn {
			t.Errorf("the letter of %s names connection %q, want %q", c.queue, got, c.conn)
		}
	}
	var stale, mismatched int
	if err := db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM expiryctl.dead_letter_tallies WHERE source_queue ~ '^[a-z]+://[^/]+:[0-9]+/' AND letters <> 0),
			(SELECT count(*) FROM (SELECT source_queue, sum(letters) AS n FROM expiryctl.dead_letter_tallies GROUP BY 1) t
			   FULL JOIN (SELECT source_queue, count(*) AS n FROM expiryctl.dead_letter_states GROUP BY 1) s USING (source_queue)
			  WHERE coalesce(t.n, 0) <> coalesce(s.n, 0))`).Scan(&stale, &mismatched); err != nil {
		t.Fatal(err)
	}
	if stale != 0 || mismatched != 0 {
		t.Errorf("%d tallies still count a server's queue name, %d queues' tallies differ from their letters", stale, mismatched)
	}

	// The same failed job, captured again through the connection of the
	// derived name, is the letter already stored.
	conn := config.DeriveName("river", legacy[0].authority, legacy[0].database)
	again := job(deadletter.System("river"), "river://"+conn+"/expiry", "1")
	res, err := deadletter.InsertAs(ctx, db.Pool, "", again.SourceQueue, []deadletter.Letter{again})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stored != 0 || res.Duplicates != 1 {
		t.Errorf("capturing the job again stored %d letters, %d duplicates; want the one already stored", res.Stored, res.Duplicates)
	}
}
