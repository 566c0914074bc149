package deadletter

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// errNotPlainHeaders sends DecodeHeaders to encoding/json: the table holds
// something the one-pass reading leaves to it (a number, a tag, a nested
// table or list, an escape, a key that begins with "$", or broken JSON),
// and encoding/json's reading, or its error, is the one that counts.
var errNotPlainHeaders = errors.New("not plain headers")

// readPlainHeaders reads a header table of plain members, strings without
// escapes, booleans and nulls, in one pass. It is what a replay is left
// with once the failure bookkeeping is cut out (the original exchange and
// routing key, a tenant), decoded once a message.
func readPlainHeaders(raw []byte) (map[string]any, error) {
	return readInPlace(raw, readPlainHeadersFrom, jsontext.AllowDuplicateNames(true))
}

func readPlainHeadersFrom(dec *jsontext.Decoder) (map[string]any, error) {
	if dec.PeekKind() != '{' {
		return nil, errNotPlainHeaders
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, errNotPlainHeaders
	}
	h := map[string]any{}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil || bytes.IndexByte(name, '\\') >= 0 || bytes.HasPrefix(name, []byte(`"$`)) {
			return nil, errNotPlainHeaders
		}
		kind := dec.PeekKind()
		value, err := dec.ReadValue()
		if err != nil {
			return nil, errNotPlainHeaders
		}
		key := string(name[1 : len(name)-1])
		switch kind {
		case '"':
			if bytes.IndexByte(value, '\\') >= 0 {
				return nil, errNotPlainHeaders
			}
			h[key] = string(value[1 : len(value)-1])
		case 't':
			h[key] = true
		case 'f':
			h[key] = false
		case 'n':
			h[key] = nil
		default:
			return nil, errNotPlainHeaders
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, errNotPlainHeaders
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, errNotPlainHeaders
	}
	return h, nil
}
