package deadletter

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// System names the queue system a letter was captured from. Each is a
// driver (internal/adapter/driver): a source that captures its dead
// letters and a target that takes them back. The archive knows a system
// by the row the migrate registered for it (store.QueueSystem), and a
// view by the SystemInfo its caller gives it.
type System string

// The systems the core still tells apart by name: RabbitMQ's AMQP
// properties and SQS's attributes are read here.
const (
	// RabbitMQ letters carry AMQP headers and basic properties. A letter
	// whose system is empty is RabbitMQ's: it was captured before the
	// archive recorded systems.
	RabbitMQ System = "rabbitmq"
	// SQS letters carry typed message attributes as their headers (see
	// SQSAttribute) and SQS's system attributes as Native.
	SQS System = "sqs"
)

// DefaultSystem is the system of a letter or target that names none:
// RabbitMQ's, whose letters were captured before letters named their
// system, and whose targets name none still.
const DefaultSystem = RabbitMQ

// OrDefault is s, or DefaultSystem when s is empty.
func (s System) OrDefault() System {
	if s == "" {
		return DefaultSystem
	}
	return s
}

// systemScheme is what a system's name may be in a queue's name.
var systemScheme = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// QueueSystem is the system of the queue a letter was captured from, read
// from its name, so that a summary need not read letters to know it: an
// SQS queue is named by its ARN, the queue of a system whose queue names
// carry their connection by SYSTEM://CONNECTION/QUEUE (the archive refuses
// a letter whose system and queue disagree, and every driver's prefix is
// its system's name and "://", which drivertest holds), anything else is
// RabbitMQ's.
func QueueSystem(queue string) System {
	if strings.HasPrefix(queue, "arn:aws:sqs:") {
		return SQS
	}
	if scheme, _, ok := strings.Cut(queue, "://"); ok && systemScheme.MatchString(scheme) {
		return System(scheme)
	}
	return RabbitMQ
}

// queueSystems are the systems of queues, each once: RabbitMQ's, SQS's,
// then the others by name.
func queueSystems(queues []string) []System {
	seen := map[System]bool{}
	for _, q := range queues {
		seen[QueueSystem(q)] = true
	}
	out := []System{}
	for _, s := range []System{RabbitMQ, SQS} {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}

// SystemInfo is what a view says of a queue system, from its driver.
type SystemInfo struct {
	System System
	// Title is how the system reads in prose ("River").
	Title string
	// QueuePrefix begins its queues' names as letters carry them; empty
	// for the system whose queues are named plainly.
	QueuePrefix string
	// RetriesInPlace: a replay retries the job where its store keeps it.
	RetriesInPlace bool
	// Routes: a message goes through a route (an exchange); its letters
	// keep their wire properties and the broker's records of their deaths.
	Routes bool
	// NamesConnectionInQueue: a queue's name is QueuePrefix, the
	// connection's name, "/" and the queue there.
	NamesConnectionInQueue bool
	// NoOrigin says what a replay of a letter that names no queue it came
	// from needs, for a system without routes.
	NoOrigin string
}

// Systems are what a process knows of the queue systems, from their
// drivers (internal/adapter/registry).
type Systems []SystemInfo

// Named is what is known of system s; a system no driver describes reads
// as its name.
func (ss Systems) Named(s System) SystemInfo {
	s = s.OrDefault()
	for _, info := range ss {
		if info.System == s {
			return info
		}
	}
	return SystemInfo{System: s, Title: string(s)}
}

// Of is the system whose queues' names queue has the form of: the one
// whose prefix it begins with, else the one whose queues are named
// plainly.
func (ss Systems) Of(queue string) SystemInfo {
	for _, info := range ss {
		if info.QueuePrefix != "" && strings.HasPrefix(queue, info.QueuePrefix) {
			return info
		}
	}
	for _, info := range ss {
		if info.QueuePrefix == "" {
			return info
		}
	}
	return SystemInfo{System: RabbitMQ, Title: string(RabbitMQ)}
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
