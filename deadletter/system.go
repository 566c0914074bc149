package deadletter

import (
	"encoding/json"
	"fmt"
	"strings"
)

// System names the queue system a letter was captured from. Each is a
// driver: a source that captures its dead letters and a target that takes
// them back.
type System string

// The systems expiryctl captures from.
const (
	// RabbitMQ letters carry AMQP headers and basic properties. A letter
	// whose system is empty is RabbitMQ's: it was captured before the
	// archive recorded systems.
	RabbitMQ System = "rabbitmq"
	// SQS letters carry typed message attributes as their headers (see
	// SQSAttribute) and SQS's system attributes as Native.
	SQS System = "sqs"
	// River letters are jobs a River client discarded: a row of
	// river_job in a database of its own, read and never changed by
	// capture. See JobStoreMessage for how a job becomes a Message.
	River System = "river"
	// BullMQ letters are jobs in a BullMQ queue's failed set on Redis,
	// read and never changed by capture.
	BullMQ System = "bullmq"
	// JobTable letters are rows of a team's own jobs table in a failed
	// state, read through a mapping of its columns that a second person
	// approved, and never changed by capture.
	JobTable System = "jobtable"
)

// Systems lists every system.
func Systems() []System { return []System{RabbitMQ, SQS, River, BullMQ, JobTable} }

// Queue names of the job-store systems: a letter's queue is its
// connection's name and the queue there, never a server:
// river://CONNECTION/QUEUE, bullmq://CONNECTION/PREFIX/QUEUE or
// jobtable://CONNECTION/SCHEMA.TABLE; the operator's configuration says
// which server a connection's name reaches (package config).
const (
	RiverQueuePrefix    = "river://"
	BullMQQueuePrefix   = "bullmq://"
	JobTableQueuePrefix = "jobtable://"
)

// RetriesInPlace reports whether a replay of the system's letters retries
// the job where it is (River, BullMQ, a jobs table) rather than publishing
// a copy.
func (s System) RetriesInPlace() bool { return s == River || s == BullMQ || s == JobTable }

// OrRabbitMQ is s, or RabbitMQ when s is empty.
func (s System) OrRabbitMQ() System {
	if s == "" {
		return RabbitMQ
	}
	return s
}

// QueueSystem is the system of the queue a letter was captured from, read
// from its name: an SQS queue is named by its ARN, and the archive refuses
// a letter whose system and queue disagree (the constraint
// dead_letters_system_names_queue), so a summary need not read letters to
// know it.
func QueueSystem(queue string) System {
	switch {
	case strings.HasPrefix(queue, "arn:aws:sqs:"):
		return SQS
	case strings.HasPrefix(queue, RiverQueuePrefix):
		return River
	case strings.HasPrefix(queue, BullMQQueuePrefix):
		return BullMQ
	case strings.HasPrefix(queue, JobTableQueuePrefix):
		return JobTable
	}
	return RabbitMQ
}

// queueSystems are the systems of queues, each once, in Systems' order.
func queueSystems(queues []string) []System {
	seen := map[System]bool{}
	for _, q := range queues {
		seen[QueueSystem(q)] = true
	}
	out := []System{}
	for _, s := range Systems() {
		if seen[s] {
			out = append(out, s)
		}
	}
	return out
}

// SQSAttribute is one SQS message attribute as received: its data type,
// which may carry a custom suffix ("Number.float", "Binary.png",
// "String.json"), and its value, a string for the String and Number
// types and bytes for Binary. A letter from SQS holds its message
// attributes as SQSAttribute values in Message.Headers, so that a replay
// sends each back with the type it came with.
type SQSAttribute struct {
	DataType    string
	StringValue string
	BinaryValue []byte
}

// BaseType is the attribute's type without its custom suffix: "String",
// "Number" or "Binary" (or what an odd server sent, as it came).
func (a SQSAttribute) BaseType() string {
	base, _, _ := strings.Cut(a.DataType, ".")
	return base
}

// Binary says whether the value is in BinaryValue.
func (a SQSAttribute) Binary() bool { return a.BaseType() == "Binary" }

// DecodeSQSAttributes reads the headers of a letter from SQS back into its
// message attributes: a plain string is a String attribute, as
// EncodeHeaders wrote it, and anything else was an SQSAttribute. A value
// no SQS letter can hold is an error.
func DecodeSQSAttributes(raw json.RawMessage) (map[string]SQSAttribute, error) {
	headers, err := DecodeHeaders(raw)
	if err != nil {
		return nil, err
	}
	attrs := make(map[string]SQSAttribute, len(headers))
	for name, v := range headers {
		switch x := v.(type) {
		case string:
			attrs[name] = SQSAttribute{DataType: "String", StringValue: x}
		case SQSAttribute:
			attrs[name] = x
		default:
			return nil, fmt.Errorf("decode SQS attributes: %q holds a %T, which no SQS message attribute is", name, v)
		}
	}
	return attrs, nil
}
