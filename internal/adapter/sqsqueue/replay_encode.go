package sqsqueue

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/replay"
)

// maxAttributes is how many message attributes SQS takes on one message.
const maxAttributes = 10

// Wire is an SQS message's own fields, which Encode builds and Publish
// sends: its message attributes, each with its type, and, for a FIFO
// queue, its message group and deduplication id.
type Wire struct {
	Attributes               map[string]deadletter.SQSAttribute
	GroupID, DeduplicationID string
}

// Encode implements replay.Encoder: the letter goes back to the queue it
// came from, with its attributes as received (replayAttributes), in its
// message group, with a deduplication id of the replay's.
func (p *Publisher) Encode(c replay.Copy) (replay.Message, error) {
	attrs, err := replayAttributes(c.Headers, c.Marks)
	if err != nil {
		return replay.Message{}, err
	}
	return replay.Message{Item: c.Item, System: c.System, RoutingKey: c.RoutingKey, Body: c.Body, NotBefore: c.NotBefore,
		Wire: Wire{Attributes: attrs, GroupID: c.GroupID, DeduplicationID: deduplicationID(c.Request, c.Item)}}, nil
}

// replayAttributes are the attributes of a replayed letter from SQS: its
// message attributes as received, each with its type, its failure
// bookkeeping already cut out, plus the replay's marks, as many as SQS's
// ten allow, in order: the first replay.MarksRequired (the request and the
// replay count, how a job that dies again is linked to this replay) must
// fit, or the letter cannot be replayed to SQS as it is; the rest go while
// there is room.
func replayAttributes(stored []byte, marks []replay.Mark) (map[string]deadletter.SQSAttribute, error) {
	orig, err := deadletter.DecodeSQSAttributes(stored)
	if err != nil {
		return nil, fmt.Errorf("stored attributes cannot be decoded: %w", err)
	}
	attrs := maps.Clone(orig)
	if attrs == nil {
		attrs = map[string]deadletter.SQSAttribute{}
	}
	for i, m := range marks {
		a := attribute(m.Value)
		if a.StringValue == "" {
			continue // SQS refuses an empty value
		}
		_, replaces := attrs[m.Name]
		if !replaces && len(attrs) >= maxAttributes {
			if i < replay.MarksRequired {
				return nil, fmt.Errorf("SQS takes %d message attributes and the letter has %d of its own: a replay adds %s and %s, which would not fit; "+
					"discard it, or have the producer send fewer attributes", maxAttributes, len(orig), marks[0].Name, marks[1].Name)
			}
			continue
		}
		attrs[m.Name] = a
	}
	return attrs, nil
}

// attribute is a mark's value as an SQS message attribute: a number, or
// text (a time as RFC 3339).
func attribute(v any) deadletter.SQSAttribute {
	switch v := v.(type) {
	case int64:
		return deadletter.SQSAttribute{DataType: "Number", StringValue: strconv.FormatInt(v, 10)}
	case time.Time:
		return deadletter.SQSAttribute{DataType: "String", StringValue: v.UTC().Format(time.RFC3339)}
	}
	return deadletter.SQSAttribute{DataType: "String", StringValue: fmt.Sprint(v)}
}

// MaxDelay is the longest delivery delay SQS gives one message
// (DelaySeconds). A FIFO queue delays only as a whole, never one message.
const MaxDelay = 900 * time.Second

// MaxDelay implements replay.Delayer: an item of a standard queue is sent
// up to MaxDelay before its time, the rest of its wait as its delay.
func (p *Publisher) MaxDelay(queue string) time.Duration {
	if strings.HasSuffix(queue, ".fifo") {
		return 0
	}
	return MaxDelay
}

// deduplicationID is the deduplication id of an item's message on a FIFO
// queue: fresh to the request, so that SQS does not take the replay for a
// copy of the original sent within five minutes, and the same for every
// publish of the item in the request, so that a publish repeated after a
// lost answer is not delivered twice within them.
func deduplicationID(request, item int64) string {
	return "expiryctl-replay-" + strconv.FormatInt(request, 10) + "-" + strconv.FormatInt(item, 10)
}
