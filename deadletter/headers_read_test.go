package deadletter

import "testing"

// FuzzPlainHeadersAsEncodingJSON holds the one-pass reading of a plain
// header table to encoding/json's: whatever it reads, encoding/json reads
// the same, without an error.
func FuzzPlainHeadersAsEncodingJSON(f *testing.F) {
	holdOnePassToEncodingJSON(f, []string{
		`{"x-original-exchange":"reservations","x-original-routing-key":"reservation.expire"}`,
		`{"tenant":"acme-eu-1","flag":true,"off":false,"none":null}`,
		`{"a":"1","a":"2"}`, `{}`, `null`, `{"$$x":"y"}`, `{"$key:AA==":"v"}`, `{"n":1}`, `{"n":1.5}`,
		`{"t":{"$time":"2026-11-30T12:00:00Z"}}`, `{"l":["a"]}`, `{"e":"caf\u00e9"}`, `{"a":"b"} x`, `{"a":"b",}`,
	}, readPlainHeaders, func(raw []byte) (map[string]any, error) { return decodeHeadersByEncodingJSON(raw) })
}

// TestPlainHeadersReadInOnePass pins that a replay's usual table, the
// original exchange and routing key, takes the one-pass reading.
func TestPlainHeadersReadInOnePass(t *testing.T) {
	raw := EncodeHeaders(map[string]any{"x-original-exchange": "reservations", "x-original-routing-key": "reservation.expire"})
	got, err := readPlainHeaders(raw)
	if err != nil {
		t.Fatalf("readPlainHeaders(%s): %v", raw, err)
	}
	if got["x-original-exchange"] != "reservations" || got["x-original-routing-key"] != "reservation.expire" || len(got) != 2 {
		t.Fatalf("read %#v", got)
	}
}
