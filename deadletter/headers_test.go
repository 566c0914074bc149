package deadletter

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
)

// roundTripHeaders is a table with every AMQP value type amqp091-go decodes
// and the awkward cases around them.
func roundTripHeaders() map[string]any {
	return map[string]any{
		"plain":        "expire:r-8421:v3",
		"html":         "<a href='x'>&amp;</a>",
		"nul":          "before\x00after",
		"invalid-utf8": "caf\xe9",
		"escapes":      `C:\path\x00 "quoted" \u0000`,
		"empty":        "",
		"bool":         true,
		"nil":          nil,
		"byte":         byte(200),
		"int8":         int8(-8),
		"int16":        int16(-16000),
		"int32":        int32(-2_000_000_000),
		"int64":        int64(math.MaxInt64),
		"int":          42,
		"uint16":       uint16(65535),
		"uint32":       uint32(4_000_000_000),
		"float-whole":  3.0,
		"float-tiny":   5e-324,
		"float-huge":   1e21,
		"float-max":    math.MaxFloat64,
		"float32":      float32(0.1),
		"nan":          math.NaN(),
		"inf":          math.Inf(1),
		"-inf":         math.Inf(-1),
		"-zero":        math.Copysign(0, -1),
		"bytes":        []byte{0, 1, 2, 0xff},
		"bytes-empty":  []byte{},
		"time":         time.Unix(1_796_040_000, 0), // as amqp091-go decodes: local zone
		"time-nanos":   time.Date(2026, 11, 30, 12, 20, 0, 123456789, time.UTC),
		"time-far":     time.Unix(1<<40, 0),
		"time-before":  time.Unix(-1<<40, 5),
		"decimal":      amqp.Decimal{Scale: 2, Value: -12345},
		"$bytes":       "a real key that looks like a tag",
		"$$":           "two dollars",
		"$key:abc":     "a real key that looks like an escaped key",
		"key\x00nul":   "key with NUL",
		"key\xffbad":   "key that is not UTF-8",
		"table": amqp.Table{
			"nested": map[string]any{"deep": []any{int32(1), "two", []byte("3")}},
			"$time":  "not a tag",
		},
		"array":        []any{nil, true, "x", []any{}, amqp.Table{}},
		"tables":       []amqp.Table{{"a": int64(1)}},
		"strings":      []string{"a", "b"},
		"routing-keys": []any{"reservation.expire"},
	}
}

// wantDecoded is what DecodeHeaders should return for v: every AMQP wire
// type as it was (a Go int, which is no wire type, as a long), UTC times,
// amqp.Table for every table and []any for every array.
func wantDecoded(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case time.Time:
		return x.UTC()
	case map[string]any:
		return wantTable(x)
	case amqp.Table:
		return wantTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = wantDecoded(e)
		}
		return out
	case []amqp.Table:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = wantTable(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	}
	return v
}

func wantTable(t map[string]any) amqp.Table {
	out := amqp.Table{}
	for k, v := range t {
		out[k] = wantDecoded(v)
	}
	return out
}

// comparable replaces what reflect.DeepEqual cannot compare: NaN, and the
// sign of zero, which DeepEqual ignores.
func comparableValue(v any) any {
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN float"
		case x == 0 && math.Signbit(x):
			return "-0 float"
		}
	case amqp.Table:
		out := amqp.Table{}
		for k, e := range x {
			out[k] = comparableValue(e)
		}
		return out
	case map[string]any:
		return comparableValue(amqp.Table(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = comparableValue(e)
		}
		return out
	}
	return v
}

func assertJSONBSafe(t testing.TB, raw json.RawMessage) {
	t.Helper()
	if !json.Valid(raw) {
		t.Fatalf("not valid JSON: %s", raw)
	}
	if !utf8.Valid(raw) {
		t.Fatalf("not valid UTF-8: %q", raw)
	}
	if hasEscapedNUL(raw) {
		t.Fatalf("holds \\u0000, which jsonb rejects: %s", raw)
	}
}

// hasEscapedNUL finds a \u0000 escape, not an escaped backslash followed by
// the text u0000.
func hasEscapedNUL(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] == 'u' && strings.HasPrefix(string(raw[i+2:]), "0000") {
			return true
		}
		i++ // skip the escaped character, which may be a backslash
	}
	return false
}

func TestHeadersRoundTrip(t *testing.T) {
	t.Parallel()
	h := roundTripHeaders()
	raw := EncodeHeaders(h)
	assertJSONBSafe(t, raw)

	got, err := DecodeHeaders(raw)
	if err != nil {
		t.Fatalf("DecodeHeaders: %v\n%s", err, raw)
	}
	want := comparableValue(wantTable(h))
	if !reflect.DeepEqual(comparableValue(amqp.Table(got)), want) {
		t.Errorf("round trip differs\n got: %#v\nwant: %#v\njson: %s", got, want, raw)
	}
	// What comes back must be publishable again.
	if err := amqp.Table(got).Validate(); err != nil {
		t.Errorf("decoded headers are not a valid AMQP table: %v", err)
	}
	// And encoding it again gives the same bytes.
	if again := EncodeHeaders(got); string(again) != string(raw) {
		t.Errorf("re-encoding differs:\n%s\n%s", raw, again)
	}
}

func TestEncodeHeadersFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   map[string]any
		want string
	}{
		{"nil table", nil, `{}`},
		{"plain values", map[string]any{"s": "x<y", "b": false, "n": nil, "i": int32(3), "f": 3.0, "g": 0.25},
			`{"b":false,"f":3.0,"g":0.25,"i":{"$int32":3},"n":null,"s":"x<y"}`},
		{"wire types", map[string]any{"b": int8(-8), "B": uint8(200), "s": int16(-300), "u": uint16(65535),
			"I": int32(-70000), "i": uint32(4000000000), "l": int64(1) << 40, "f": float32(0.1), "d": 0.1,
			"fn": float32(math.NaN()), "fz": float32(math.Copysign(0, -1))},
			`{"B":{"$uint8":200},"I":{"$int32":-70000},"b":{"$int8":-8},"d":0.1,"f":{"$float32":"0.1"},` +
				`"fn":{"$float32":"NaN"},"fz":{"$float32":"-0"},"i":{"$uint32":4000000000},"l":1099511627776,` +
				`"s":{"$int16":-300},"u":{"$uint16":65535}}`},
		{"bytes", map[string]any{"x": []byte("hi")}, `{"x":{"$bytes":"aGk="}}`},
		{"string with NUL", map[string]any{"x": "a\x00"}, `{"x":{"$string":"YQA="}}`},
		{"invalid utf-8", map[string]any{"x": "\xff"}, `{"x":{"$string":"/w=="}}`},
		{"time", map[string]any{"x": time.Date(2026, 11, 30, 13, 20, 0, 0, time.FixedZone("CET", 3600))},
			`{"x":{"$time":"2026-11-30T12:20:00Z"}}`},
		{"time beyond year 9999", map[string]any{"x": time.Unix(1<<40, 0)}, `{"x":{"$time":"@1099511627776"}}`},
		{"decimal", map[string]any{"x": amqp.Decimal{Scale: 2, Value: 150}}, `{"x":{"$decimal":{"scale":2,"value":150}}}`},
		{"special floats", map[string]any{"a": math.NaN(), "b": math.Inf(-1)},
			`{"a":{"$float":"NaN"},"b":{"$float":"-Inf"}}`},
		{"large float keeps its point", map[string]any{"x": 1e21}, `{"x":1000000000000000000000.0}`},
		{"dollar key", map[string]any{"$bytes": "x"}, `{"$$bytes":"x"}`},
		{"unsafe key", map[string]any{"a\x00": 1}, `{"$key:YQA=":1}`},
		{"maps of other types", map[string]any{"s": map[string]string{"b": "1", "a": "2\x00"}, "n": map[string]int8{"n": -1}},
			`{"n":{"n":{"$int8":-1}},"s":{"a":{"$string":"MgA="},"b":"1"}}`},
		{"unsupported", map[string]any{"x": struct{}{}, "c": make(chan int)},
			`{"c":{"$unsupported":"chan int"},"x":{"$unsupported":"struct {}"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := EncodeHeaders(tt.in)
			if string(got) != tt.want {
				t.Errorf("EncodeHeaders = %s, want %s", got, tt.want)
			}
			assertJSONBSafe(t, got)
		})
	}
}

func TestEncodeHeadersIsDeterministic(t *testing.T) {
	t.Parallel()
	first := EncodeHeaders(roundTripHeaders())
	for range 20 {
		if got := EncodeHeaders(roundTripHeaders()); string(got) != string(first) {
			t.Fatalf("encoding changed between runs:\n%s\n%s", first, got)
		}
	}
}

func TestEncodeHeadersSurvivesCycles(t *testing.T) {
	t.Parallel()
	h := map[string]any{}
	h["self"] = h
	list := []any{nil}
	list[0] = list
	h["list"] = list
	raw := EncodeHeaders(h)
	assertJSONBSafe(t, raw)
	if !strings.Contains(string(raw), `"$unsupported":"nesting deeper than 64"`) {
		t.Errorf("want the cycle cut with a tag, got %.200s", raw)
	}
	if _, err := DecodeHeaders(raw); err != nil {
		t.Errorf("DecodeHeaders: %v", err)
	}
}

func TestDecodeHeadersAcceptsReformattedJSON(t *testing.T) {
	t.Parallel()
	// What jsonb hands back: other key order, spaces, escapes written out.
	raw := `{"z": {"$time": "2026-11-30T12:20:00Z"}, "a": [1, 2.0, "\u00e9"], "$$x": {"$key:AA==": {"$bytes": ""}}}`
	got, err := DecodeHeaders(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"z":  time.Date(2026, 11, 30, 12, 20, 0, 0, time.UTC),
		"a":  []any{int64(1), 2.0, "é"},
		"$x": amqp.Table{"\x00": []byte{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func TestDecodeHeadersNull(t *testing.T) {
	t.Parallel()
	got, err := DecodeHeaders(json.RawMessage(`null`))
	if err != nil || got != nil {
		t.Errorf("DecodeHeaders(null) = %v, %v; want nil, nil", got, err)
	}
}

func TestDecodeHeadersRejectsWhatEncodeCannotWrite(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		``,
		`{`,
		`[]`,
		`"x"`,
		`{} {}`,
		`{"$bytes":"aGk="}`,
		`{"x":{"$bytes":"not base64!"}}`,
		`{"x":{"$bytes":1}}`,
		`{"x":{"$string":"%%%"}}`,
		`{"x":{"$time":"yesterday"}}`,
		`{"x":{"$time":"@12.5"}}`,
		`{"x":{"$float":"1.5"}}`,
		`{"x":{"$decimal":{"scale":256,"value":1}}}`,
		`{"x":{"$decimal":{"scale":1,"value":2147483648}}}`,
		`{"x":{"$decimal":{"scale":1}}}`,
		`{"x":{"$nope":1}}`,
		`{"$x":1,"y":2}`,
		`{"$key:!!":1}`,
		`{"$$a":1,"$key:JGE=":2}`,
		`{"x":1e999}`,
		`{"x":{"$int8":128}}`,
		`{"x":{"$uint8":-1}}`,
		`{"x":{"$int16":"1"}}`,
		`{"x":{"$uint32":4294967296}}`,
		`{"x":{"$int32":1.5}}`,
		`{"x":{"$float32":1.5}}`,
		`{"x":{"$float32":"one"}}`,
	} {
		if got, err := DecodeHeaders(json.RawMessage(raw)); err == nil {
			t.Errorf("DecodeHeaders(%s) = %#v, want an error", raw, got)
		}
	}
}

func TestDecodeHeadersNamesWhereTheBadValueIs(t *testing.T) {
	t.Parallel()
	_, err := DecodeHeaders(json.RawMessage(`{"ok":1,"a":{"b":[1,{"$int8":128}]}}`))
	if err == nil || !strings.Contains(err.Error(), `"a"."b"[1]`) {
		t.Errorf("error %v, want it to name \"a\".\"b\"[1]", err)
	}
	_, err = DecodeHeaders(json.RawMessage(`{"a":[{"$x":1}]}`))
	if err == nil || !strings.Contains(err.Error(), `"a"[0]."$x"`) {
		t.Errorf("error %v, want it to name \"a\"[0].\"$x\"", err)
	}
}

// TestHeadersRoundTripThroughJSONB checks the claim the encoding exists for:
// PostgreSQL accepts it and what jsonb gives back decodes to the same table.
func TestHeadersRoundTripThroughJSONB(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	h := roundTripHeaders()
	var stored string
	if err := db.Pool.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(EncodeHeaders(h))).Scan(&stored); err != nil {
		t.Fatalf("jsonb refused the encoding: %v", err)
	}
	got, err := DecodeHeaders(json.RawMessage(stored))
	if err != nil {
		t.Fatalf("DecodeHeaders(jsonb output): %v\n%s", err, stored)
	}
	if want := comparableValue(wantTable(h)); !reflect.DeepEqual(comparableValue(amqp.Table(got)), want) {
		t.Errorf("round trip through jsonb differs\n got: %#v\nwant: %#v\njsonb: %s", got, want, stored)
	}
}
