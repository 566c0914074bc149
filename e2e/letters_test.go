package e2e_test

import (
	"fmt"
	"maps"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// epoch anchors every time the factories write. AMQP timestamps carry whole
// seconds, so the factories stay on whole seconds and values compare exactly
// after a round trip.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// job is one reservation-expiry command as the message contract describes it.
type job struct {
	n       int
	version int
}

// newJob returns the job that expires reservation r-n at version 3.
func newJob(n int) job { return job{n: n, version: 3} }

func (j job) reservation() string { return fmt.Sprintf("r-%d", j.n) }

func (j job) idempotencyKey() string {
	return fmt.Sprintf("expire:%s:v%d", j.reservation(), j.version)
}

func (j job) holdUntil() time.Time { return epoch.Add(time.Duration(j.n) * time.Minute) }

func (j job) body() []byte {
	return fmt.Appendf(nil, `{"reservation_id":%q,"expected_version":%d,"hold_until":%q,"idempotency_key":%q,"attempt":1}`,
		j.reservation(), j.version, j.holdUntil().Format(time.RFC3339), j.idempotencyKey())
}

// message is the job as the API's outbox publishes it; RabbitMQ dead-letters
// this form itself, adding only x-death.
func (j job) message() amqp.Publishing {
	return amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    j.idempotencyKey(),
		Body:         j.body(),
	}
}

// workerLetter is the copy the expiry worker publishes to the DLQ after
// attempts failures of errorClass: the job plus the headers that say why.
func (j job) workerLetter(errorClass, lastError string, attempts int) amqp.Publishing {
	m := j.message()
	history := make([]any, attempts)
	for i := range history {
		history[i] = amqp.Table{
			"at":          j.attemptAt(i),
			"error_class": errorClass,
			"error":       fmt.Sprintf("attempt %d: %s", i+1, lastError),
		}
	}
	m.Headers = amqp.Table{
		"x-error-class":          errorClass,
		"x-last-error":           lastError,
		"x-attempt-history":      history,
		"x-original-exchange":    "reservations",
		"x-original-routing-key": "reservation.expire",
	}
	return m
}

// attemptAt spaces the jobs a minute apart and their attempts ten seconds
// apart, so that dead_lettered_at (the newest attempt) orders the jobs.
func (j job) attemptAt(i int) time.Time {
	return epoch.Add(time.Duration(j.n)*time.Minute + time.Duration(i)*10*time.Second)
}

// workerLetters returns the worker letters of jobs first … first+n-1.
func workerLetters(first, n int, errorClass, lastError string) []amqp.Publishing {
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = newJob(first+i).workerLetter(errorClass, lastError, 3)
	}
	return msgs
}

// rawLetter is a letter built by hand, for input no well-behaved producer
// sends. x-test-letter names it, so that the test finds its row whatever the
// rest of the letter did to the parser.
func rawLetter(name string, body []byte, headers amqp.Table) amqp.Publishing {
	h := amqp.Table{"x-test-letter": name}
	maps.Copy(h, headers)
	return amqp.Publishing{ContentType: "application/json", MessageId: "letter-" + name, Body: body, Headers: h}
}
