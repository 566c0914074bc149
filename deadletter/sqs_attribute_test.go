package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// TestSQSAttributesRoundTrip: every message attribute SQS can hand over
// comes back from the archive's encoding with its type and value, the
// edge cases included: empty values, custom types with dots, names that
// look like the encoding's own tags, and text jsonb cannot hold; through
// PostgreSQL's jsonb, as the archive stores them.
func TestSQSAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	in := map[string]deadletter.SQSAttribute{
		"plain":         {DataType: "String", StringValue: "hello"},
		"empty":         {DataType: "String", StringValue: ""},
		"custom":        {DataType: "String.json", StringValue: `{"a":1}`},
		"dotted":        {DataType: "Number.float.x", StringValue: "1.5"},
		"number":        {DataType: "Number", StringValue: "-0"},
		"bin":           {DataType: "Binary", BinaryValue: []byte{0, 1, 0xff}},
		"bin-empty":     {DataType: "Binary.png", BinaryValue: []byte{}},
		"nul":           {DataType: "String", StringValue: "a\x00b"},
		"$sqs":          {DataType: "String", StringValue: "a name like the tag"},
		"$key:x":        {DataType: "Number", StringValue: "3"},
		"$":             {DataType: "String", StringValue: "$"},
		"looks-tagged":  {DataType: "String", StringValue: `{"$sqs":{"type":"Binary","bytes":""}}`},
		"invalid-utf8":  {DataType: "String", StringValue: "\xff\xfe"},
		"untyped-empty": {DataType: "", StringValue: ""},
	}
	headers := make(map[string]any, len(in))
	for k, v := range in {
		headers[k] = v
	}
	db := pgtest.New(t)
	var stored string
	if err := db.Pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(deadletter.EncodeHeaders(headers))).Scan(&stored); err != nil {
		t.Fatalf("jsonb refused the encoding: %v", err)
	}
	got, err := deadletter.DecodeSQSAttributes(json.RawMessage(stored))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Errorf("%d attributes back, want %d: %+v", len(got), len(in), got)
	}
	for name, want := range in {
		g, ok := got[name]
		if !ok {
			t.Errorf("%q: missing", name)
			continue
		}
		if g.DataType != want.DataType || g.StringValue != want.StringValue || !bytes.Equal(g.BinaryValue, want.BinaryValue) ||
			(want.BinaryValue != nil) != (g.BinaryValue != nil) {
			t.Errorf("%q: got %+v, want %+v", name, g, want)
		}
	}
}
