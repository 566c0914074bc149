package deadletter

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The body members readJob takes, each in the contract's snake_case and
// the camelCase Node.js producers send; the snake_case one wins when a body
// has both.
const (
	memberReservationID = iota
	memberIdempotencyKey
	memberExpectedVersion
	memberHoldUntil
	memberAttempt
	jobMemberCount
)

// jobMemberNames maps each name, quoted as it stands in the body, to its
// member and spelling.
var jobMemberNames = map[string]jobMemberName{
	`"reservation_id"`: {memberReservationID, false}, `"reservationId"`: {memberReservationID, true},
	`"idempotency_key"`: {memberIdempotencyKey, false}, `"idempotencyKey"`: {memberIdempotencyKey, true},
	`"expected_version"`: {memberExpectedVersion, false}, `"expectedVersion"`: {memberExpectedVersion, true},
	`"hold_until"`: {memberHoldUntil, false}, `"holdUntil"`: {memberHoldUntil, true},
	`"attempt"`: {memberAttempt, false},
}

type jobMemberName struct {
	member int
	camel  bool
}

// jobMembers holds the raw JSON of the members readJob takes: snake
// beside camel, so that a body with both spellings reads as it did when
// the members were looked up in a map (snake first), and, as there, the
// last of two members of one name wins.
type jobMembers struct {
	snake, camel [jobMemberCount]json.RawMessage
}

func (m *jobMembers) get(member int) json.RawMessage {
	if m.snake[member] != nil {
		return m.snake[member]
	}
	return m.camel[member]
}

func (m *jobMembers) set(quotedName []byte, value []byte) {
	name, ok := jobMemberNames[string(quotedName)]
	switch {
	case !ok:
	case name.camel:
		m.camel[name.member] = value
	default:
		m.snake[name.member] = value
	}
}

// inPlaceReader walks a small JSON document once, without building a map
// or copying a value: over a bytes.Buffer, the decoder reads the document
// where it lies, so the names and values it returns are the document's own
// bytes. Kept in a pool, as capture and replay read one or two documents
// a letter.
type inPlaceReader struct {
	buf bytes.Buffer
	dec *jsontext.Decoder
}

var inPlaceReaders = sync.Pool{New: func() any {
	return &inPlaceReader{dec: jsontext.NewDecoder(bytes.NewBuffer(nil))}
}}

// readObjectInPlace walks the members of doc, which must be one JSON object,
// and gives member each one's quoted name, its kind and its raw value, all
// doc's own bytes. Duplicate names are passed on as they come. It returns
// errNotOneObject when doc is anything else, or member's error.
func readObjectInPlace(doc []byte, member func(name []byte, kind jsontext.Kind, value []byte) error) error {
	r := inPlaceReaders.Get().(*inPlaceReader)
	defer inPlaceReaders.Put(r)
	r.buf = *bytes.NewBuffer(doc)
	defer func() { r.buf = bytes.Buffer{} }()
	dec := r.dec
	dec.Reset(&r.buf, jsontext.AllowDuplicateNames(true))
	if dec.PeekKind() != '{' {
		return errNotOneObject
	}
	if _, err := dec.ReadToken(); err != nil {
		return errNotOneObject
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return errNotOneObject
		}
		kind := dec.PeekKind()
		value, err := dec.ReadValue()
		if err != nil {
			return errNotOneObject
		}
		if err := member(name, kind, value); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return errNotOneObject
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return errNotOneObject
	}
	return nil
}

// errNotOneObject says the body is not a single JSON object as jsontext
// reads it; readJob then words the problem as encoding/json does.
var errNotOneObject = errors.New("not one JSON object")

// readJobMembers reads the members readJob takes from body, which must be
// valid UTF-8. Any body that is not one well-formed JSON object gives
// errNotOneObject. Member names are matched exactly, as the contract is
// case sensitive; duplicate names are allowed, the last one winning, as
// encoding/json has always read them.
func readJobMembers(body []byte) (jobMembers, error) {
	var m jobMembers
	err := readObjectInPlace(body, func(name []byte, _ jsontext.Kind, value []byte) error {
		if bytes.IndexByte(name, '\\') >= 0 {
			// A name spelled with escapes is the name it decodes to.
			unquoted, err := jsontext.AppendUnquote(nil, name)
			if err != nil {
				return errNotOneObject
			}
			name = append(append([]byte{'"'}, unquoted...), '"')
		}
		m.set(name, value)
		return nil
	})
	return m, err
}
