package broker

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// DeadLetterMessage converts a delivery from a dead-letter queue into the
// broker-neutral form the deadletter package parses.
func DeadLetterMessage(queue string, d *amqp.Delivery) deadletter.Message {
	return deadletter.Message{
		Queue:       queue,
		Body:        d.Body,
		Headers:     d.Headers,
		ContentType: d.ContentType,
		MessageID:   d.MessageId,
		Timestamp:   d.Timestamp,
	}
}
