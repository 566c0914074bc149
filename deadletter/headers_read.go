package deadletter

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// errNotPlainHeaders sends DecodeHeaders to encoding/json: the table holds
// something the one-pass reading leaves to it (a number, a tag, a nested
// table or list, an escape, a key that begins with "$"), and
// encoding/json's reading, or its error, is the one that counts.
var errNotPlainHeaders = errors.New("not plain headers")

// readPlainHeaders reads a header table of plain members, strings without
// escapes, booleans and nulls, in one pass; anything else gives an error,
// errNotOneObject for broken JSON. It is what a replay is left with once
// the failure bookkeeping is cut out (the original exchange and routing
// key, a tenant), decoded once a message.
func readPlainHeaders(raw []byte) (map[string]any, error) {
	h := map[string]any{}
	err := readObjectInPlace(raw, func(name []byte, kind jsontext.Kind, value []byte) error {
		if bytes.IndexByte(name, '\\') >= 0 || bytes.HasPrefix(name, []byte(`"$`)) {
			return errNotPlainHeaders
		}
		key := string(name[1 : len(name)-1])
		switch kind {
		case '"':
			if bytes.IndexByte(value, '\\') >= 0 {
				return errNotPlainHeaders
			}
			h[key] = string(value[1 : len(value)-1])
		case 't':
			h[key] = true
		case 'f':
			h[key] = false
		case 'n':
			h[key] = nil
		default:
			return errNotPlainHeaders
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}
