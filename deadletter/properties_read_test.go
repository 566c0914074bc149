package deadletter

import (
	"reflect"
	"testing"
)

// FuzzPlainPropertiesAsEncodingJSON holds the one-pass reading of stored
// properties to encoding/json's: whatever it reads, encoding/json reads
// the same, without an error.
func FuzzPlainPropertiesAsEncodingJSON(f *testing.F) {
	holdOnePassToEncodingJSON(f, []string{
		`{"content_type":"application/json","delivery_mode":2,"message_id":"expire:r-1:v3","timestamp":1796040000}`,
		`{"priority":9,"type":"t","user_id":"guest","app_id":"a","reply_to":"r","correlation_id":"c","expiration":"60000","content_encoding":"gzip"}`,
		`{"content_type":"a","content_type":"b"}`,
		`{"delivery_mode":256}`, `{"delivery_mode":-1}`, `{"delivery_mode":2.0}`, `{"timestamp":1e9}`,
		`{"content_type":null}`, `{"content_type":{"$string":"AA=="}}`, `{"content_type":"caf\u00e9"}`,
		`{"unknown":"x"}`, `{"content_type":"x"} {}`, `{}`, `null`, `{"Content_Type":"x"}`,
	}, readPlainProperties, decodePropertiesByEncodingJSON)
}

// TestPlainPropertiesReadInOnePass pins that what EncodeProperties writes
// for an ordinary message takes the one-pass reading.
func TestPlainPropertiesReadInOnePass(t *testing.T) {
	ts := int64(1796040000)
	p := Properties{ContentType: "application/json", DeliveryMode: 2, MessageID: "expire:r-1:v3", Timestamp: &ts, Priority: 4}
	got, err := readPlainProperties(EncodeProperties(p))
	if err != nil {
		t.Fatalf("readPlainProperties(%s): %v", EncodeProperties(p), err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("read %+v, want %+v", got, p)
	}
}
