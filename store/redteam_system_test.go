package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestRedTeamSQSLettersAreNotReplayedToRabbitMQ: the runner publishes to
// RabbitMQ only, so a replay request that holds a letter captured from SQS
// is refused (rule system), by the CLI's call and by alice's raw SQL; the
// letter keeps its system, which nobody can change; a discard of it is
// allowed.
func TestRedTeamSQSLettersAreNotReplayedToRabbitMQ(t *testing.T) {
	t.Parallel()
	rt := setupRedTeam(t)
	ctx := context.Background()
	body := []byte(`{"reservation_id":"r-sqs","idempotency_key":"expire:r-sqs:v1"}`)
	arn := "arn:aws:sqs:us-east-1:100010001000:reservation-expiry-dlq"
	letter := deadletter.Letter{System: deadletter.SQS, Native: []byte(`{"MessageId":"m-1"}`), Fingerprint: sha256.Sum256(body),
		JobKey: "expire:r-sqs:v1", IdempotencyKey: "expire:r-sqs:v1", SourceQueue: arn, OriginQueue: "arn:aws:sqs:us-east-1:100010001000:reservation-expiry",
		Category: deadletter.TransientExhausted, Headers: []byte(`{}`), Payload: body, DeadLetteredAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	stored, err := deadletter.InsertAs(ctx, rt.ivan.Pool, "", arn, []deadletter.Letter{letter})
	if err != nil || stored.Stored != 1 {
		t.Fatalf("the ingester cannot capture an SQS letter: %+v, %v", stored, err)
	}
	id := stored.FirstID
	var system string
	if err := rt.owner.QueryRow(ctx, `SELECT source_system FROM expiryctl.dead_letters WHERE id = $1`, id).Scan(&system); err != nil || system != "sqs" {
		t.Fatalf("stored system %q, %v; want sqs", system, err)
	}

	refused(t, rt.alice.Pool, "system", `SELECT * FROM expiryctl.replay_request_create('', 'replay', $1::jsonb, 0, 0, '', '', 'INC-7',
		false, false, false, NULL, false, false, NULL, false, NULL)`, fmt.Sprintf(`{"ids": [%d, %d]}`, rt.letters[0], id))
	for _, who := range []string{"owner", "ivan"} {
		pool := rt.owner
		if who == "ivan" {
			pool = rt.ivan.Pool
		}
		if _, err := pool.Exec(ctx, `UPDATE expiryctl.dead_letters SET source_system = 'rabbitmq' WHERE id = $1`, id); err == nil {
			t.Errorf("%s turned an SQS letter into a RabbitMQ one", who)
		}
	}
	if _, err := rt.alice.Pool.Exec(ctx, `SELECT * FROM expiryctl.replay_request_create('', 'discard', $1::jsonb, 0, 0, '', '', 'INC-7',
		false, false, false, NULL, false, false, NULL, false, NULL)`, fmt.Sprintf(`{"ids": [%d]}`, id)); err != nil {
		t.Errorf("a discard of an SQS letter: %v", err)
	}
}
