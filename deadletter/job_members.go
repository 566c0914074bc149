package deadletter

import (
	"bytes"
	"encoding/json"

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
