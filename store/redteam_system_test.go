package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// TestRedTeamReplayGoesBackToItsOwnSystem: a replay goes back to the
// system its letters came from. alice, with raw SQL as well as through the
// service, cannot mix RabbitMQ and SQS letters in one request (rule
// system), nor send an SQS letter through a RabbitMQ exchange or to no
// SQS queue (rule target); naming the SQS queue by its ARN is accepted,
// and the frozen target says SQS. Nobody, the owner included, can make an
// SQS letter a RabbitMQ one, and the ingester cannot store a letter of a
// system the archive does not know.
func TestRedTeamReplayGoesBackToItsOwnSystem(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	body := []byte(`{"reservation_id":"r-sqs","idempotency_key":"expire:r-sqs:v1"}`)
	dlqARN := "arn:aws:sqs:us-east-1:100010001000:reservation-expiry-dlq"
	workARN := "arn:aws:sqs:us-east-1:100010001000:reservation-expiry"
	letter := deadletter.Letter{System: deadletter.SQS, Native: []byte(`{"MessageId":"m-1"}`), Fingerprint: sha256.Sum256(body),
		JobKey: "expire:r-sqs:v1", IdempotencyKey: "expire:r-sqs:v1", SourceQueue: dlqARN,
		Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	stored, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", dlqARN, []deadletter.Letter{letter})
	if err != nil || stored.Stored != 1 {
		t.Fatalf("the ingester cannot capture an SQS letter: %+v, %v", stored, err)
	}
	id := stored.FirstID
	var system string
	if err := rt.owner.QueryRow(ctx, `SELECT source_system FROM expiryctl.dead_letters WHERE id = $1`, id).Scan(&system); err != nil || system != "sqs" {
		t.Fatalf("stored system %q, %v; want sqs", system, err)
	}

	create := `SELECT * FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, NULL, 0, $2, $3, 'INC-7',
		false, false, true, 'SQS shows no consumers', false, $4, NULL, false, 'the red team captures nothing')`
	refused(t, rt.alice.Pool, "system", create, fmt.Sprintf(`{"ids": [%d, %d]}`, rt.letters[0], id), "", workARN, false)
	// A filter that matches both systems' letters is refused as ids are.
	refused(t, rt.alice.Pool, "system", create, `{"filter": {"reason": ["transient-exhausted"]}, "max": 100}`, "", workARN, false)
	refused(t, rt.alice.Pool, "target", create, fmt.Sprintf(`{"ids": [%d]}`, id), "", "", false)
	refused(t, rt.alice.Pool, "target", create, fmt.Sprintf(`{"ids": [%d]}`, id), "reservations", "reservation.expire", false)
	refused(t, rt.alice.Pool, "target", create, fmt.Sprintf(`{"ids": [%d]}`, id), "", "reservation-expiry", false)

	created, err := (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: []int64{id}}, Why: "INC-7", ToRoutingKey: workARN,
		SameHandlerWhy: "SQS shows no consumers", UnwatchedWhy: "the red team captures nothing"})
	if err != nil {
		t.Fatalf("a request naming the SQS queue by its ARN: %v", err)
	}
	if got := created.Request.Targets; len(got) != 1 || got[0].System != deadletter.SQS || got[0].RoutingKey != workARN {
		t.Errorf("frozen targets %+v, want the SQS queue %s", got, workARN)
	}
	// The system is one the archive knows: the ingester's raw SQL cannot
	// store a letter of another.
	var stray []int64
	err = rt.ivan.Pool.QueryRow(ctx, `SELECT array_agg(x) FROM expiryctl.ingest_letters('', 'q.dlq',
		ARRAY[sha256('stray')], ARRAY['expire:stray:v1'], ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[NULL::text],
		ARRAY[NULL::bigint], ARRAY[NULL::timestamptz], ARRAY['q.dlq'], ARRAY['q'], ARRAY[''], ARRAY[''], ARRAY['transient-exhausted'],
		ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[1], ARRAY['[]'], ARRAY['{}'], ARRAY[''], ARRAY['stray'::bytea], ARRAY[now()],
		ARRAY[NULL::bigint], ARRAY[0], ARRAY[NULL::text], ARRAY['kafka'], ARRAY[NULL::text]) AS x`).Scan(&stray)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "23503" || pgErr.ConstraintName != "dead_letters_source_system_fkey" {
		t.Errorf("the ingester stored letters %v of a queue system the archive does not know (%v), want refused by the system's foreign key", stray, err)
	}
	for _, who := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"owner", rt.owner}, {"ivan", rt.ivan.Pool}} {
		if _, err := who.pool.Exec(ctx, `UPDATE expiryctl.dead_letters SET source_system = 'rabbitmq' WHERE id = $1`, id); err == nil {
			t.Errorf("%s turned an SQS letter into a RabbitMQ one", who.name)
		}
	}
}

// TestRedTeamJobStoreLettersAreRetriedInPlace: a job store's letter
// (River here) goes back only as a retry of its own job. alice, with raw
// SQL, cannot send it to a RabbitMQ exchange, a queue of her choosing or
// with a fresh key (rules target and fresh-key); the frozen target is the
// job's own queue. The ingester cannot store a River letter named as
// another system's queue, nor a RabbitMQ letter named as a River queue,
// which would make the summary read its system wrong, nor a job store's
// letter whose queue names a server rather than a connection, or another
// connection than the letter records (dead_letters_connection_named): a
// letter never says which server to dial.
func TestRedTeamJobStoreLettersAreRetriedInPlace(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	body := []byte(`{"reservation_id":"r-river","idempotency_key":"expire:r-river:v1"}`)
	queue := "river://jobs/expiry"
	letter := deadletter.Letter{System: deadletter.System("river"), Native: []byte(`{"job_id":"42","incarnation":"2026-11-30T03:00:00Z"}`),
		Fingerprint: sha256.Sum256(body), JobKey: "expire:r-river:v1", IdempotencyKey: "expire:r-river:v1", SourceQueue: queue,
		Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	stored, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", queue, []deadletter.Letter{letter})
	if err != nil || stored.Stored != 1 {
		t.Fatalf("the ingester cannot capture a River letter: %+v, %v", stored, err)
	}
	id := stored.FirstID

	create := `SELECT * FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, NULL, 0, $2, $3, 'INC-8',
		$5, $5, true, 'River shows no workers', false, $4, NULL, false, 'the red team captures nothing')`
	ids := fmt.Sprintf(`{"ids": [%d]}`, id)
	refused(t, rt.alice.Pool, "target", create, ids, "reservations", "reservation.expire", false, false)
	refused(t, rt.alice.Pool, "target", create, ids, "", "reservation-expiry", false, false)
	refused(t, rt.alice.Pool, "target", create, ids, "", "", true, false)
	refused(t, rt.alice.Pool, "fresh-key", create, ids, "", "", false, true)

	created, err := (&replay.Service{Pool: rt.alice.Pool}).Create(ctx, replay.NewRequest{Kind: replay.KindReplay,
		Selection: replay.Selection{IDs: []int64{id}}, Why: "INC-8",
		SameHandlerWhy: "River shows no workers", UnwatchedWhy: "the red team captures nothing"})
	if err != nil {
		t.Fatalf("a request to retry the River job in place: %v", err)
	}
	if got := created.Request.Targets; len(got) != 1 || got[0].System != deadletter.System("river") || got[0].RoutingKey != queue {
		t.Errorf("frozen targets %+v, want the job's own queue %s", got, queue)
	}

	for _, bad := range []struct {
		system deadletter.System
		queue  string
	}{{deadletter.System("river"), "reservation-expiry.dlq"}, {deadletter.RabbitMQ, "river://jobs/expiry"},
		{deadletter.System("bullmq"), "river://jobs/expiry"}} {
		l := letter
		l.System, l.SourceQueue = bad.system, bad.queue
		l.Fingerprint = sha256.Sum256([]byte(string(bad.system) + bad.queue))
		_, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", bad.queue, []deadletter.Letter{l})
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) ||
			(pgErr.ConstraintName != "dead_letters_system_names_queue" && pgErr.ConstraintName != "dead_letters_connection_named") {
			t.Errorf("a %s letter named %q: %v, want refused by dead_letters_system_names_queue", bad.system, bad.queue, err)
		}
	}
	for _, forged := range []struct {
		system            deadletter.System
		queue, connection string
	}{
		{deadletter.System("river"), "river://attacker.example:5432/reservations/expiry", ""},
		{deadletter.System("river"), "river://alice@jobs/expiry", ""},
		{deadletter.System("bullmq"), "bullmq://attacker.example:6379/0/bull/expiry", ""},
		{deadletter.System("jobtable"), "jobtable://attacker.example:5432/jobs/public.jobs", ""},
		{deadletter.System("river"), "river://jobs/expiry", "attacker"},
		{deadletter.System("bullmq"), "bullmq://redis/bull/expiry", "attacker.example:6379"},
	} {
		l := letter
		l.System, l.SourceQueue, l.Connection = forged.system, forged.queue, forged.connection
		l.Fingerprint = sha256.Sum256([]byte("forged" + forged.queue + forged.connection))
		_, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", forged.queue, []deadletter.Letter{l})
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.ConstraintName != "dead_letters_connection_named" {
			t.Errorf("the ingester stored a %s letter of queue %q, connection %q: %v; want refused by dead_letters_connection_named",
				forged.system, forged.queue, forged.connection, err)
		}
	}
}
