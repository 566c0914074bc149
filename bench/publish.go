package bench

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// letterBase anchors the generated letters' timestamps, so every run
// publishes byte-identical messages.
var letterBase = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var errorClasses = []struct{ class, text string }{
	{"db_timeout", "expire reservation %s: timeout: context deadline exceeded (SQLSTATE 57014) after 5s"},
	{"throttled", "expire reservation %s: 429 Too Many Requests from inventory-service, retry-after 30s"},
	{"validation", "hold_until is before created_at for reservation %s: refusing to expire"},
	{"not_found", "reservation %s not found in reservations (deleted by retention job?)"},
	{"version_conflict", "reservation %s is at version 4, job expected 3: already changed"},
}

// workerLetter is what the reference worker publishes to the dead-letter
// exchange for job n after its retries ran out: a ~200-byte contract body,
// the error class and text, a two-entry attempt history, the original
// exchange and routing key, and the x-death entry its trip through a retry
// queue left (the worker copies the delivery's headers). Message ids are
// distinct per n.
func workerLetter(n int) amqp.Publishing {
	rid := fmt.Sprintf("r-%07d", n)
	ec := errorClasses[n%len(errorClasses)]
	text := fmt.Sprintf(ec.text, rid)
	at := letterBase.Add(time.Duration(n) * 10 * time.Millisecond).Truncate(time.Second)
	return amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    "expire:" + rid + ":v3",
		Timestamp:    at,
		Body: fmt.Appendf(nil, `{"reservation_id":"%s","expected_version":3,"hold_until":"2026-11-30T12:20:00Z",`+
			`"idempotency_key":"expire:%s:v3","attempt":2,"tenant":"acme-eu-1","hold_id":"h-%08x","not_before":null}`,
			rid, rid, n*2654435761%(1<<32)),
		Headers: amqp.Table{
			"x-error-class":          ec.class,
			"x-last-error":           text,
			"x-original-exchange":    "reservations",
			"x-original-routing-key": "reservation.expire",
			"x-attempt-history": []any{
				amqp.Table{"at": at.Add(-40 * time.Second), "error_class": ec.class, "error": text},
				amqp.Table{"at": at, "error_class": ec.class, "error": text},
			},
			"x-death": []any{amqp.Table{
				"count": int64(1), "reason": "expired", "queue": "reservation-expiry.retry.30s",
				"exchange": "", "routing-keys": []any{"reservation-expiry.retry.30s"},
				"time": at.Add(-5 * time.Second), "original-expiration": "30000",
			}},
		},
	}
}

// publishLetters publishes workerLetter(0..n-1) to queue with publisher
// confirms, keeping up to window messages unconfirmed, and returns once the
// broker confirmed them all.
func publishLetters(ctx context.Context, conn *amqp.Connection, queue string, n, window int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	settle := func(confirms []*amqp.DeferredConfirmation) error {
		for _, c := range confirms {
			ok, err := c.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("broker nacked a publish to %s", queue)
			}
		}
		return nil
	}
	for i := range n {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, workerLetter(i))
		if err != nil {
			return fmt.Errorf("publish to %s: %w", queue, err)
		}
		pending = append(pending, c)
		if len(pending) == window {
			half := window / 2
			if err := settle(pending[:half]); err != nil {
				return err
			}
			pending = append(pending[:0], pending[half:]...)
		}
	}
	return settle(pending)
}
