package worker

import (
	"encoding/json"
	"strings"
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
	// HeaderRetryAfter holds, in whole seconds, how long the service a job
	// failed against asked to be left alone (a Retry-After), on a letter
	// dead-lettered with such an error: a replay should not publish it
	// sooner.
	HeaderRetryAfter = "x-retry-after"
)

// maxErrorText bounds each error text the worker puts in a header. A job
// retried five times carries five of them, and an AMQP header block has to
// fit in one frame (128 KiB by default): an unbounded driver error could
// make the dead-letter publish itself fail.
const maxErrorText = 1024

// priorHistory returns the x-attempt-history entries a delivery carries:
// an array of tables, or a string holding the same array as JSON, as
// Node.js producers send it (JSON.stringify). A header of the wrong shape
// is replaced rather than trusted: the history only informs the budget and
// the operator, and a foreign value must not stop the job from being
// dead-lettered.
func priorHistory(h amqp.Table) []any {
	var list []any
	switch v := h[HeaderAttemptHistory].(type) {
	case []any:
		list = v
	case string:
		list = historyFromJSON(v)
	case []byte:
		list = historyFromJSON(string(v))
	}
	entries := make([]any, 0, len(list)+1)
	for _, e := range list {
		if t, ok := e.(amqp.Table); ok {
			entries = append(entries, t)
		}
	}
	return entries
}

// historyFromJSON reads a JSON array of objects as tables, their numbers as
// longs where they are whole and doubles otherwise, which is how the
// worker then sends them on; nil when s is not such an array.
func historyFromJSON(s string) []any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var entries []map[string]any
	if err := dec.Decode(&entries); err != nil {
		return nil
	}
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		if e != nil {
			out = append(out, jsonToAMQP(e))
		}
	}
	return out
}

func jsonToAMQP(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		t := make(amqp.Table, len(x))
		for k, e := range x {
			t[k] = jsonToAMQP(e)
		}
		return t
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonToAMQP(e)
		}
		return out
	}
	return v
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
