package broker

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// The headers that carry what a replayed message cannot send as the
// properties it was received with.
const (
	// HeaderOriginalUserID carries a user_id that RabbitMQ would refuse
	// from the replaying connection, which may only claim its own user.
	HeaderOriginalUserID = "x-original-user-id"
	// HeaderOriginalReplyTo carries a reply_to of RabbitMQ's direct
	// reply-to pseudo-queue, which only a channel consuming it may send.
	HeaderOriginalReplyTo = "x-original-reply-to"
)

// directReplyTo is RabbitMQ's direct reply-to pseudo-queue: a publish that
// names it as reply_to on a channel not consuming from it closes the channel.
const directReplyTo = "amq.rabbitmq.reply-to"

// Encode implements replay.Encoder: the letter goes back with the
// properties it was received with (replayProperties) as its Wire, and its
// headers with their wire types, its bookkeeping cut out, plus the
// replay's marks and what the properties could not carry. A fresh-key
// replay gives the message id the fresh key's suffix too. The broker's own
// login decides which user_id it may send, so a run that fails over to a
// node logged in as another user encodes for that user.
func (b *AMQPBroker) Encode(c replay.Copy) (replay.Message, error) {
	props, moved, err := replayProperties(c.Properties, c.ContentType, c.MessageID, b.User())
	if err != nil {
		return replay.Message{}, fmt.Errorf("stored properties cannot be decoded: %w", err)
	}
	headers, err := replayHeaders(c.Headers, c.Marks, moved)
	if err != nil {
		return replay.Message{}, fmt.Errorf("stored headers cannot be decoded: %w", err)
	}
	if c.FreshKeys && props.MessageID != "" {
		props.MessageID = replay.FreshKey(props.MessageID, c.Request)
	}
	return replay.Message{Item: c.Item, System: c.System, Exchange: c.Exchange, RoutingKey: c.RoutingKey, Headers: headers,
		Body: c.Body, MessageID: props.MessageID, NotBefore: c.NotBefore, Wire: props}, nil
}

// replayHeaders rebuilds the header table of a replayed job: the stored
// original headers (their bookkeeping already cut out), decoded
// losslessly with their wire types, plus the headers naming the replay and
// those carrying the properties that could not be sent as properties
// (moved).
func replayHeaders(stored []byte, marks []replay.Mark, moved map[string]any) (map[string]any, error) {
	h, err := deadletter.DecodeHeaders(stored)
	if err != nil {
		return nil, err
	}
	// DecodeHeaders' table is the item's own, fresh each call: the
	// replay's headers go into it rather than into a copy.
	if h == nil {
		h = make(map[string]any, len(marks)+len(moved))
	}
	for _, m := range marks {
		h[m.Name] = m.Value
	}
	for k, v := range moved {
		h[k] = v
	}
	return h, nil
}

// replayProperties returns the properties a replayed job is sent with: the
// ones it was received with, except that it is always persistent (the run
// marks a letter replayed on the broker's confirm, which a transient
// message does not outlive a broker restart), and that a user_id other
// than publishAs, the broker's login, and a reply_to of the direct
// reply-to pseudo-queue are left out, because RabbitMQ would close the
// channel over them; they are returned as moved, the headers that carry
// them instead. A letter captured before properties were recorded (stored
// is nil) has only its content type and message id.
func replayProperties(stored []byte, contentType, messageID, publishAs string) (p deadletter.Properties, moved map[string]any, err error) {
	if stored != nil {
		if p, err = deadletter.DecodeProperties(stored); err != nil {
			return deadletter.Properties{}, nil, err
		}
	} else {
		p = deadletter.Properties{ContentType: contentType, MessageID: messageID}
	}
	p.DeliveryMode = amqp.Persistent
	if p.UserID != "" && p.UserID != publishAs {
		moved = map[string]any{HeaderOriginalUserID: p.UserID}
		p.UserID = ""
	}
	if p.ReplyTo == directReplyTo {
		if moved == nil {
			moved = map[string]any{}
		}
		moved[HeaderOriginalReplyTo] = p.ReplyTo
		p.ReplyTo = ""
	}
	return p, moved, nil
}
