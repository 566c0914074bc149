package deadletter

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// propertyMembers numbers the members EncodeProperties writes: the
// strings in propertyStrings' order, then the three numbers.
var propertyMembers = map[string]int{
	`"content_type"`: 0, `"content_encoding"`: 1, `"correlation_id"`: 2, `"reply_to"`: 3, `"expiration"`: 4,
	`"message_id"`: 5, `"type"`: 6, `"user_id"`: 7, `"app_id"`: 8,
	`"delivery_mode"`: propertyDeliveryMode, `"priority"`: propertyPriority, `"timestamp"`: propertyTimestamp,
}

const (
	propertyDeliveryMode = 9 + iota
	propertyPriority
	propertyTimestamp
)

// errNotPlainProperties sends DecodeProperties to encoding/json: the
// object holds something the one-pass reading leaves to it (a tag, an
// escape, a null, an unknown member, a number of the wrong kind), and
// encoding/json's reading, or its error, is the one that counts.
var errNotPlainProperties = errors.New("not plain properties")

// readPlainProperties reads the properties EncodeProperties writes for
// nearly every message (strings without escapes, small integers) in one
// pass; anything else gives an error, errNotOneObject for broken JSON.
func readPlainProperties(raw []byte) (Properties, error) {
	var p Properties
	strs := [...]*string{&p.ContentType, &p.ContentEncoding, &p.CorrelationID, &p.ReplyTo, &p.Expiration,
		&p.MessageID, &p.Type, &p.UserID, &p.AppID}
	err := readObjectInPlace(raw, func(name []byte, kind jsontext.Kind, value []byte) error {
		member, known := propertyMembers[string(name)]
		switch {
		case !known:
			return errNotPlainProperties
		case member < len(strs):
			if kind != '"' || bytes.IndexByte(value, '\\') >= 0 {
				return errNotPlainProperties
			}
			*strs[member] = string(value[1 : len(value)-1])
		case kind != '0':
			return errNotPlainProperties
		case member == propertyTimestamp:
			t, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				return errNotPlainProperties
			}
			p.Timestamp = &t
		default:
			n, err := strconv.ParseUint(string(value), 10, 8)
			if err != nil {
				return errNotPlainProperties
			}
			if member == propertyDeliveryMode {
				p.DeliveryMode = uint8(n)
			} else {
				p.Priority = uint8(n)
			}
		}
		return nil
	})
	return p, err
}
