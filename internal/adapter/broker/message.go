package broker

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
)

// DeadLetterMessage converts a delivery from a dead-letter queue into the
// broker-neutral form the deadletter package parses.
func DeadLetterMessage(queue string, d *amqp.Delivery) deadletter.Message {
	return deadletter.Message{
		Queue:           queue,
		Body:            d.Body,
		Headers:         d.Headers,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    d.DeliveryMode,
		Priority:        d.Priority,
		CorrelationID:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		Expiration:      d.Expiration,
		MessageID:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		UserID:          d.UserId,
		AppID:           d.AppId,
	}
}
