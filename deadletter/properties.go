package deadletter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Properties are a message's AMQP basic properties, other than its headers,
// as they were received. A string property the client saw as empty and a
// number it saw as zero were not sent (amqp091-go cannot tell the two
// apart); the timestamp is the one property whose absence it reports.
//
// cluster-id is missing: amqp091-go reads it into an unexported field and
// cannot send it, so no letter captured through it carries one.
type Properties struct {
	ContentType     string
	ContentEncoding string
	// DeliveryMode is 1 (transient) or 2 (persistent); 0 means not sent.
	DeliveryMode  uint8
	Priority      uint8
	CorrelationID string
	ReplyTo       string
	Expiration    string
	MessageID     string
	// Timestamp is the 64-bit value on the wire: seconds by the AMQP spec,
	// milliseconds from producers that pass Date.now() through. Nil means
	// the message had none.
	Timestamp *int64
	Type      string
	UserID    string
	AppID     string
}

// Time returns the timestamp as the client library decodes it (seconds), or
// the zero time when there is none.
func (p Properties) Time() time.Time {
	if p.Timestamp == nil {
		return time.Time{}
	}
	return time.Unix(*p.Timestamp, 0).UTC()
}

// properties returns what m carried.
func (m Message) properties() *Properties {
	p := &Properties{ContentType: m.ContentType, ContentEncoding: m.ContentEncoding, DeliveryMode: m.DeliveryMode,
		Priority: m.Priority, CorrelationID: m.CorrelationID, ReplyTo: m.ReplyTo, Expiration: m.Expiration,
		MessageID: m.MessageID, Type: m.Type, UserID: m.UserID, AppID: m.AppID}
	if !m.Timestamp.IsZero() {
		sec := m.Timestamp.Unix()
		p.Timestamp = &sec
	}
	return p
}

// propertyStrings lists the string properties by their stored names.
func (p *Properties) propertyStrings() []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{
		{"content_type", &p.ContentType}, {"content_encoding", &p.ContentEncoding},
		{"correlation_id", &p.CorrelationID}, {"reply_to", &p.ReplyTo}, {"expiration", &p.Expiration},
		{"message_id", &p.MessageID}, {"type", &p.Type}, {"user_id", &p.UserID}, {"app_id", &p.AppID},
	}
}

// EncodeProperties returns p as the archive stores it: a JSON object of the
// properties that were sent, by their AMQP names in snake case, with string
// values that are not valid UTF-8 or hold NUL tagged as in EncodeHeaders,
// so that each comes back byte for byte.
func EncodeProperties(p Properties) json.RawMessage {
	obj := map[string]any{}
	for _, s := range p.propertyStrings() {
		if *s.v != "" {
			obj[s.name] = encodeValue(*s.v, 1)
		}
	}
	if p.DeliveryMode != 0 {
		obj["delivery_mode"] = json.Number(strconv.Itoa(int(p.DeliveryMode)))
	}
	if p.Priority != 0 {
		obj["priority"] = json.Number(strconv.Itoa(int(p.Priority)))
	}
	if p.Timestamp != nil {
		obj["timestamp"] = json.Number(strconv.FormatInt(*p.Timestamp, 10))
	}
	return appendTree(nil, obj)
}

// DecodeProperties reverses EncodeProperties.
func DecodeProperties(raw []byte) (Properties, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return Properties{}, fmt.Errorf("decode properties: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Properties{}, errors.New("decode properties: unexpected data after the object")
	}
	var p Properties
	known := map[string]bool{}
	for _, s := range p.propertyStrings() {
		known[s.name] = true
		v, ok := obj[s.name]
		if !ok {
			continue
		}
		d, err := decodeValue(v, s.name)
		text, isText := d.(string)
		if err != nil || !isText {
			return Properties{}, fmt.Errorf("decode properties: %s: want a string, got %s", s.name, jsonKind(v))
		}
		*s.v = text
	}
	small := map[string]*uint8{"delivery_mode": &p.DeliveryMode, "priority": &p.Priority}
	for name, dst := range small {
		known[name] = true
		if v, ok := obj[name]; ok {
			n, err := decodeBoundedInt(v, 0, 255)
			if err != nil {
				return Properties{}, fmt.Errorf("decode properties: %s: %w", name, err)
			}
			*dst = uint8(n)
		}
	}
	known["timestamp"] = true
	if v, ok := obj["timestamp"]; ok {
		n, err := decodeBoundedInt(v, math.MinInt64, math.MaxInt64)
		if err != nil {
			return Properties{}, fmt.Errorf("decode properties: timestamp: %w", err)
		}
		p.Timestamp = &n
	}
	for name := range obj {
		if !known[name] {
			return Properties{}, fmt.Errorf("decode properties: unknown property %q", name)
		}
	}
	return p, nil
}

// MarshalJSON writes p as EncodeProperties does, so that `-o json` shows
// each property byte for byte, as the archive holds it.
func (p Properties) MarshalJSON() ([]byte, error) { return EncodeProperties(p), nil }

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *Properties) UnmarshalJSON(b []byte) error {
	d, err := DecodeProperties(b)
	if err != nil {
		return err
	}
	*p = d
	return nil
}
