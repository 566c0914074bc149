package worker

import (
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The headers the worker writes, as the message contract names them.
const (
	// HeaderErrorClass holds the JobError class of the last failure.
	HeaderErrorClass = "x-error-class"
	// HeaderLastError holds the last failure's text, cut to 1 KiB.
	HeaderLastError = "x-last-error"
	// HeaderAttemptHistory holds one table {at, error_class, error} per
	// failed attempt, oldest first; retry copies carry it too, and its
	// length is the attempt count the budget is checked against.
	HeaderAttemptHistory = "x-attempt-history"
	// HeaderOriginalExchange holds the exchange the job was first published
	// to, which replay sends it back to.
	HeaderOriginalExchange = "x-original-exchange"
	// HeaderOriginalRoutingKey holds the routing key the job was first
	// published with.
	HeaderOriginalRoutingKey = "x-original-routing-key"
)

// maxErrorText bounds each error text the worker puts in a header. A job
// retried five times carries five of them, and an AMQP header block has to
// fit in one frame (128 KiB by default): an unbounded driver error could
// make the dead-letter publish itself fail.
const maxErrorText = 1024

// priorHistory returns the x-attempt-history entries a delivery carries. A
// header of the wrong shape is replaced rather than trusted: the history only
// informs the budget and the operator, and a foreign value must not stop the
// job from being dead-lettered.
func priorHistory(h amqp.Table) []any {
	list, ok := h[HeaderAttemptHistory].([]any)
	if !ok {
		return nil
	}
	entries := make([]any, 0, len(list)+1)
	for _, e := range list {
		if t, ok := e.(amqp.Table); ok {
			entries = append(entries, t)
		}
	}
	return entries
}

func historyEntry(at time.Time, jobErr *JobError) amqp.Table {
	return amqp.Table{
		"at":          at.UTC(),
		"error_class": jobErr.Class,
		"error":       errorText(jobErr),
	}
}

func errorText(jobErr *JobError) string {
	text := jobErr.Class
	if jobErr.Err != nil {
		text = jobErr.Err.Error()
	}
	return truncate(text, maxErrorText)
}

func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// origin is where the job was first published: the x-original-* headers when
// an earlier retry recorded them, else where this delivery came from.
func origin(d *amqp.Delivery) (exchange, routingKey string) {
	exchange, routingKey = d.Exchange, d.RoutingKey
	if x, ok := d.Headers[HeaderOriginalExchange].(string); ok {
		exchange = x
	}
	if k, ok := d.Headers[HeaderOriginalRoutingKey].(string); ok {
		routingKey = k
	}
	return exchange, routingKey
}

// copyOf rebuilds a delivery as a publishing with headers in place of the
// original ones. The body and the identifying properties are kept byte for
// byte: they are the job's identity, which replay must preserve. UserId is
// dropped because RabbitMQ refuses a publish whose user-id is not the
// publishing connection's user; Expiration is dropped so that a copy never
// inherits a TTL meant for the original.
func copyOf(d *amqp.Delivery, headers amqp.Table, timestamp time.Time) amqp.Publishing {
	return amqp.Publishing{
		Headers:         headers,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		MessageId:       d.MessageId,
		Timestamp:       timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}

func cloneHeaders(h amqp.Table) amqp.Table {
	out := make(amqp.Table, len(h)+5)
	for k, v := range h {
		out[k] = v
	}
	return out
}
