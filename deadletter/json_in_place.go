package deadletter

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

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

// errNotOneObject says a document is not a single JSON object as jsontext
// reads it; each reader then leaves it to encoding/json, whose wording of
// the problem is the one operators see.
var errNotOneObject = errors.New("not one JSON object")
