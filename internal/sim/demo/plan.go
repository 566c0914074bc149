package demo

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// phase is when a message is published, relative to the worker and the
// simulated outage.
type phase int

const (
	// workerDown: published before the worker consumes, with a TTL short
	// enough that RabbitMQ expires them into the DLQ.
	workerDown phase = iota
	// normal: published while the worker runs against a healthy database.
	normal
	// outage: published while every database call times out.
	outage
)

// brokerTTL is the per-message expiration of the workerDown jobs.
const brokerTTL = 100 * time.Millisecond

// seed is one reservation row to create before the jobs arrive.
type seed struct {
	id        string
	status    string
	version   int64
	holdUntil time.Time
	units     int
}

// message is one publishing of the plan and what should become of it.
type message struct {
	phase phase
	msg   amqp.Publishing
	// category is the reason category it should be dead-lettered with, or
	// "" when the worker should process it.
	category deadletter.Category
}

// plan is the whole incident: rows to seed and messages to publish.
type plan struct {
	seeds    []seed
	messages []message
	// flaky holds the reservations whose first attempt fails with a
	// deadlock and whose retry succeeds.
	flaky map[string]bool
}

func (p *plan) count(ph phase) int {
	n := 0
	for _, m := range p.messages {
		if m.phase == ph {
			n++
		}
	}
	return n
}

// newPlan builds the incident for one run. Every id carries runID, so a
// second run neither collides with the first's rows nor reuses its
// idempotency keys.
func newPlan(runID string, now time.Time) *plan {
	p := &plan{flaky: map[string]bool{}}
	n := 0
	nextID := func(label string) string {
		n++
		return fmt.Sprintf("r-%s-%02d-%s", runID, n, label)
	}
	// Holds ran out a few minutes ago: the jobs are due.
	due := now.Add(-5 * time.Minute).Truncate(time.Second).UTC()

	hold := func(label, status string, version int64) string {
		id := nextID(label)
		p.seeds = append(p.seeds, seed{id: id, status: status, version: version, holdUntil: due, units: 1 + n%4})
		return id
	}
	add := func(ph phase, category deadletter.Category, msg amqp.Publishing) {
		p.messages = append(p.messages, message{phase: ph, msg: msg, category: category})
	}

	// The worker is down and the jobs outlive their TTL in the queue.
	for range 3 {
		id := hold("ttl", "held", 1)
		msg := jobMessage(id, 1, due, false)
		msg.Expiration = fmt.Sprint(brokerTTL.Milliseconds())
		add(workerDown, deadletter.BrokerExpired, msg)
	}

	// Healthy traffic, half from a Node.js producer that writes camelCase.
	for i := range 8 {
		version := int64(1 + i%3)
		id := hold("ok", "held", version)
		msg := jobMessage(id, version, due, i%2 == 1)
		add(normal, "", msg)
		if i < 2 {
			// The outbox relay published it twice after a restart.
			add(normal, "", msg)
		}
	}
	// Transient blips that a retry absorbs.
	for range 3 {
		id := hold("blip", "held", 2)
		p.flaky[id] = true
		add(normal, "", jobMessage(id, 2, due, false))
	}
	// Paid, or expired by an earlier command: nothing to do.
	for _, status := range []string{"paid", "paid", "expired"} {
		id := hold(status, status, 2)
		add(normal, "", jobMessage(id, 1, due, false))
	}
	// Reservations deleted by a GDPR erasure after the job was issued.
	for range 3 {
		add(normal, deadletter.NotFound, jobMessage(nextID("gone"), 1, due, false))
	}
	// Holds extended by the customer: the version moved on.
	for range 3 {
		id := hold("extended", "held", 4)
		add(normal, deadletter.Conflict, jobMessage(id, 3, due, true))
	}
	// A producer release that broke the contract.
	validationBodies := []func(id string) map[string]any{
		func(id string) map[string]any { // camelCase producer forgot the version
			return map[string]any{"reservationId": id, "holdUntil": due.Format(time.RFC3339), "idempotencyKey": "expire:" + id}
		},
		func(id string) map[string]any { // the id field was renamed
			return map[string]any{"reservation": id, "expected_version": 1, "hold_until": due.Format(time.RFC3339), "idempotency_key": "expire:" + id + ":v1"}
		},
		func(id string) map[string]any { // a locale-formatted deadline
			return map[string]any{"reservation_id": id, "expected_version": 1, "hold_until": due.Format("02/01/2006 15:04"), "idempotency_key": "expire:" + id + ":v1"}
		},
	}
	for _, body := range validationBodies {
		id := hold("invalid", "held", 1)
		msg := jobMessage(id, 1, due, false)
		msg.Body = mustJSON(body(id))
		add(normal, deadletter.Validation, msg)
	}
	// Bodies nobody can read.
	for i, body := range undecodableBodies(runID, due) {
		add(normal, deadletter.Malformed, amqp.Publishing{
			ContentType:  body.contentType,
			MessageId:    fmt.Sprintf("demo-%s-undecodable-%d", runID, i+1),
			DeliveryMode: amqp.Persistent,
			Body:         body.data,
		})
	}

	// The burst that arrives while the database is down.
	for range 5 {
		id := hold("outage", "held", 1)
		add(outage, deadletter.TransientExhausted, jobMessage(id, 1, due, false))
	}
	return p
}

// jobMessage is a contract-conforming job: message_id derived from the
// reservation and version, so a duplicate publish has the same id.
func jobMessage(id string, version int64, due time.Time, camel bool) amqp.Publishing {
	key := fmt.Sprintf("expire:%s:v%d", id, version)
	body := map[string]any{"reservation_id": id, "expected_version": version, "hold_until": due.Format(time.RFC3339), "idempotency_key": key, "attempt": 1}
	if camel {
		body = map[string]any{"reservationId": id, "expectedVersion": version, "holdUntil": due.Format(time.RFC3339), "idempotencyKey": key, "attempt": 1}
	}
	return amqp.Publishing{
		ContentType:  "application/json",
		MessageId:    fmt.Sprintf("expire-%s-v%d", id, version),
		DeliveryMode: amqp.Persistent,
		Body:         mustJSON(body),
	}
}

type undecodable struct {
	contentType string
	data        []byte
}

// undecodableBodies are the payloads real incidents produce: a form-encoded
// body from a misconfigured client, gzip without a content-encoding, a
// truncated write, and text with terminal escape sequences that would
// repaint an operator's terminal if printed raw.
func undecodableBodies(runID string, due time.Time) []undecodable {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(mustJSON(map[string]any{"reservation_id": "r-" + runID + "-gz", "expected_version": 1}))
	_ = zw.Close()
	return []undecodable{
		{"application/x-www-form-urlencoded", []byte("reservation_id=r-" + runID + "-form&expected_version=1&hold_until=" + due.Format(time.RFC3339))},
		{"application/json", gz.Bytes()},
		{"application/json", []byte(`{"reservation_id": "r-` + runID + `-cut", "expected_ver`)},
		{"text/plain", []byte("\x1b]0;expiryctl pwned\x07\x1b[2J\x1b[1;31mEXPIRE r-" + runID + "-esc NOW\x1b[0m\r\n")},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
