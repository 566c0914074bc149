package deadletter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// SentAt is the timestamp property read as the parser reads it: seconds,
// or milliseconds when the value is too large to be seconds (amqpTimestamp).
// ok is false when there is none or it reads as no valid time; millis says
// which reading was taken.
func (p Properties) SentAt() (t time.Time, millis, ok bool) {
	if p.Timestamp == nil {
		return time.Time{}, false, false
	}
	t = amqpTimestamp(p.Time())
	return t, !t.Equal(p.Time()), validTime(t)
}

// properties returns what m carried.
func (m Message) properties() *Properties {
	if m.System.OrDefault() != RabbitMQ {
		return nil
	}
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
// so that each comes back byte for byte. It runs for every captured
// letter, so it appends rather than building a map to sort.
func EncodeProperties(p Properties) json.RawMessage {
	out := make([]byte, 0, 160)
	out = append(out, '{')
	member := func(name string) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, '"', ':')
	}
	for _, s := range p.propertyStrings() {
		if *s.v == "" {
			continue
		}
		member(s.name)
		out = appendHeaderString(out, *s.v)
	}
	if p.DeliveryMode != 0 {
		member("delivery_mode")
		out = strconv.AppendUint(out, uint64(p.DeliveryMode), 10)
	}
	if p.Priority != 0 {
		member("priority")
		out = strconv.AppendUint(out, uint64(p.Priority), 10)
	}
	if p.Timestamp != nil {
		member("timestamp")
		out = strconv.AppendInt(out, *p.Timestamp, 10)
	}
	return append(out, '}')
}

// storedProperties is EncodeProperties' object as encoding/json reads it;
// the strings stay raw because one may be a tag.
type storedProperties struct {
	ContentType     json.RawMessage `json:"content_type"`
	ContentEncoding json.RawMessage `json:"content_encoding"`
	CorrelationID   json.RawMessage `json:"correlation_id"`
	ReplyTo         json.RawMessage `json:"reply_to"`
	Expiration      json.RawMessage `json:"expiration"`
	MessageID       json.RawMessage `json:"message_id"`
	Type            json.RawMessage `json:"type"`
	UserID          json.RawMessage `json:"user_id"`
	AppID           json.RawMessage `json:"app_id"`
	DeliveryMode    *uint8          `json:"delivery_mode"`
	Priority        *uint8          `json:"priority"`
	Timestamp       *int64          `json:"timestamp"`
}

// DecodeProperties reverses EncodeProperties; an unknown property or a
// value of the wrong type is an error.
func DecodeProperties(raw []byte) (Properties, error) {
	// A replay decodes one a message: the plain ones in one pass.
	if p, err := readPlainProperties(raw); err == nil {
		return p, nil
	}
	return decodePropertiesByEncodingJSON(raw)
}

// decodePropertiesByEncodingJSON is DecodeProperties for any object: tags,
// escapes and every error, in encoding/json's words.
func decodePropertiesByEncodingJSON(raw []byte) (Properties, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var sp storedProperties
	if err := dec.Decode(&sp); err != nil {
		return Properties{}, fmt.Errorf("decode properties: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Properties{}, errors.New("decode properties: unexpected data after the object")
	}
	p := Properties{Timestamp: sp.Timestamp}
	if sp.DeliveryMode != nil {
		p.DeliveryMode = *sp.DeliveryMode
	}
	if sp.Priority != nil {
		p.Priority = *sp.Priority
	}
	raws := []json.RawMessage{sp.ContentType, sp.ContentEncoding, sp.CorrelationID, sp.ReplyTo, sp.Expiration,
		sp.MessageID, sp.Type, sp.UserID, sp.AppID}
	for i, s := range p.propertyStrings() {
		if raws[i] == nil {
			continue
		}
		text, err := decodePropertyString(raws[i])
		if err != nil {
			return Properties{}, fmt.Errorf("decode properties: %s: %w", s.name, err)
		}
		*s.v = text
	}
	return p, nil
}

// decodePropertyString reads a plain JSON string or a $string tag.
func decodePropertyString(raw json.RawMessage) (string, error) {
	var text string
	if len(raw) > 0 && raw[0] == '"' {
		err := json.Unmarshal(raw, &text)
		return text, err
	}
	var tag map[string]string
	if err := json.Unmarshal(raw, &tag); err != nil || len(tag) != 1 {
		return "", errors.New("want a string")
	}
	b64, ok := tag[tagString]
	if !ok {
		return "", errors.New("want a string")
	}
	d, err := decodeTagged(tagString, b64)
	if err != nil {
		return "", err
	}
	return d.(string), nil
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
