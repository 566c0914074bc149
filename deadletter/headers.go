package deadletter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The tags of expiryctl's header encoding. A tagged value is a JSON object
// with exactly one of these keys; real table keys that begin with "$" are
// escaped, so a tag can never be mistaken for data.
const (
	tagBytes       = "$bytes"
	tagString      = "$string"
	tagTime        = "$time"
	tagDecimal     = "$decimal"
	tagFloat       = "$float"
	tagUnsupported = "$unsupported"
	tagSQS         = "$sqs"
	keyTagPrefix   = "$key:"
)

// The tags of the AMQP wire types that JSON would otherwise widen: a plain
// JSON integer is a long ('l') and a plain number with a point a double
// ('d'), so only the narrower types need saying, and a replay sends each
// header with the type it arrived with.
const (
	tagInt8    = "$int8"    // 'b', signed byte
	tagUint8   = "$uint8"   // 'B', unsigned byte
	tagInt16   = "$int16"   // 's', short
	tagUint16  = "$uint16"  // 'u', unsigned short
	tagInt32   = "$int32"   // 'I', int
	tagUint32  = "$uint32"  // 'i', unsigned int
	tagFloat32 = "$float32" // 'f', float, as its shortest decimal text
)

// maxHeaderDepth bounds the nesting EncodeHeaders follows. amqp091-go refuses
// deeper than 32 levels on the wire, so only a Go caller can exceed it, and
// the bound turns a self-referencing map into a tag instead of a stack
// overflow, which no recover could catch.
const maxHeaderDepth = 64

// EncodeHeaders returns an AMQP header table in expiryctl's lossless JSON
// encoding, which PostgreSQL jsonb accepts (valid UTF-8, no \u0000) and
// DecodeHeaders reverses.
//
// Values that JSON can carry unambiguously stay plain, so the column reads
// naturally in psql: UTF-8 strings without NUL, bools, integers, nil, nested
// tables as objects and arrays as arrays. Floats are always written with a
// decimal point ("3.0"), which jsonb's numeric type keeps, so that they do not
// come back as integers. Everything else is a tagged object:
//
//	{"$bytes":"<base64>"}                  []byte (AMQP byte array)
//	{"$string":"<base64>"}                 string that is not UTF-8 or holds NUL
//	{"$time":"<RFC 3339, UTC>"}            time.Time ("@<unix>.<nanos>" outside years 0-9999)
//	{"$decimal":{"scale":N,"value":N}}     amqp091.Decimal
//	{"$float":"NaN"|"+Inf"|"-Inf"|"-0"}    doubles JSON or numeric cannot hold
//	{"$int8":N} {"$uint8":N}               AMQP 'b' and 'B' (int8, uint8)
//	{"$int16":N} {"$uint16":N}             AMQP 's' and 'u' (int16, uint16)
//	{"$int32":N} {"$uint32":N}             AMQP 'I' and 'i' (int32, uint32)
//	{"$float32":"<shortest text>"}         AMQP 'f' (float32), NaN and Inf too
//	{"$unsupported":"<Go type>"}           not an AMQP value; decodes to nil
//	{"$sqs":{"type":T,"string":S}}         an SQS message attribute (SQSAttribute)
//	{"$sqs":{"type":T,"bytes":"<base64>"}} of any type but a plain String one,
//	{"$sqs":{"type":T,"string_bytes":B}}   which is written as a plain string
//
// A plain integer is a long ('l', int64) and a plain number with a point a
// double ('d', float64), so every wire type comes back as it was received.
// Archives written before the narrow tags existed hold plain numbers for
// every integer; those decode as longs.
//
// A key that is not UTF-8 or holds NUL is written "$key:<base64>", and a key
// that begins with "$" gets a second "$". The output is deterministic (keys
// sorted), which the fingerprint relies on. A nil table encodes as {}, never
// null, because the column is NOT NULL.
func EncodeHeaders(h map[string]any) json.RawMessage {
	return joinHeaderEntries(encodeHeaderEntries(h), nil)
}

// headerEntry is one top-level header, its key and value already encoded.
type headerEntry struct {
	key   string // the header's own name, as received
	json  []byte // `"<encoded key>":<encoded value>`
	order string // the encoded key, which fixes the order
	// untyped is the entry as it was encoded before the narrow wire types
	// had tags, set only where that differs: the fingerprint hashes it, so
	// that a copy captured again after an upgrade still matches the copy
	// captured before.
	untyped []byte
}

// joinHeaderEntries writes the entries as one JSON object, leaving out the
// keys skip names.
func joinHeaderEntries(entries []headerEntry, skip map[string]bool) json.RawMessage {
	return joinEntries(entries, skip, false)
}

// joinUntypedEntries is joinHeaderEntries in the encoding that had no
// narrow wire-type tags, for the fingerprint.
func joinUntypedEntries(entries []headerEntry, skip map[string]bool) json.RawMessage {
	return joinEntries(entries, skip, true)
}

func joinEntries(entries []headerEntry, skip map[string]bool, untyped bool) json.RawMessage {
	size := 2
	for _, e := range entries {
		size += len(e.json) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	first := true
	for _, e := range entries {
		if skip[e.key] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if untyped && e.untyped != nil {
			out = append(out, e.untyped...)
		} else {
			out = append(out, e.json...)
		}
	}
	return append(out, '}')
}

// appendJSONString writes s, valid UTF-8, as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			// JavaScript treats these as line ends; encoding/json escapes them too.
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func encodeKey(k string) string {
	switch {
	case !jsonbSafe(k):
		return keyTagPrefix + base64.StdEncoding.EncodeToString([]byte(k))
	case strings.HasPrefix(k, "$"):
		return "$" + k
	default:
		return k
	}
}

// jsonbSafe reports whether s can be a jsonb string as it is.
func jsonbSafe(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// DecodeHeaders reverses EncodeHeaders, also after a round trip through
// jsonb (which reorders keys and reformats whitespace), returning values that
// amqp091-go publishes as the wire type they were received as: int8, uint8,
// int16, uint16, int32, uint32 and float32 from their tags, int64 for plain
// integers, float64 for plain numbers with a fraction or exponent, string,
// []byte, bool, nil, time.Time in UTC, amqp091.Decimal, amqp091.Table for
// nested tables and []any for arrays. An integer beyond int64 (only a Go
// caller can put a uint64 there) comes back as float64, and an $unsupported
// value as nil.
//
// JSON null decodes to a nil table. Anything else that EncodeHeaders cannot
// have produced, such as an unknown tag or bad base64, is an error.
func DecodeHeaders(raw json.RawMessage) (map[string]any, error) {
	// A replay decodes one a message: the plain ones in one pass.
	if h, err := readPlainHeaders(raw); err == nil {
		return h, nil
	}
	return decodeHeadersByEncodingJSON(raw)
}

// decodeHeadersByEncodingJSON is DecodeHeaders for any table: tags, numbers
// with their wire types, nesting and every error, in encoding/json's words.
func decodeHeadersByEncodingJSON(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode headers: unexpected data after the header table")
	}
	if tree == nil {
		return nil, nil
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode headers: want a JSON object, got %s", jsonKind(tree))
	}
	if _, isTag := tagOf(obj); isTag {
		return nil, errors.New("decode headers: want a header table, got a tagged value")
	}
	t, err := decodeTable(obj, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any(t), nil
}

// tagOf returns the tag of a tagged object. Only the tags EncodeHeaders
// writes count: a one-key object {"$key:...": v} is a table.
func tagOf(obj map[string]any) (string, bool) {
	if len(obj) != 1 {
		return "", false
	}
	for k := range obj {
		switch k {
		case tagBytes, tagString, tagTime, tagDecimal, tagFloat, tagUnsupported, tagSQS,
			tagInt8, tagUint8, tagInt16, tagUint16, tagInt32, tagUint32, tagFloat32:
			return k, true
		}
	}
	return "", false
}

func decodeTable(obj map[string]any, path *headerPath) (amqp.Table, error) {
	t := make(amqp.Table, len(obj))
	for ek, ev := range obj {
		k, err := decodeKey(ek)
		if err != nil {
			return nil, fmt.Errorf("decode headers: %s: %w", path.key(ek), err)
		}
		if _, dup := t[k]; dup {
			return nil, fmt.Errorf("decode headers: %s: key %q appears twice", path.key(ek), k)
		}
		v, err := decodeValue(ev, &headerPath{parent: path, name: ek})
		if err != nil {
			return nil, err
		}
		t[k] = v
	}
	return t, nil
}

// headerPath is where a value sits in a header table: a key of its
// parent, or an element when index is set. It is spelled out only for an
// error: quoting every key on the way down took a fifth of decoding a
// worker letter's headers.
type headerPath struct {
	parent *headerPath
	name   string
	index  *int
}

func (p *headerPath) String() string {
	switch {
	case p == nil:
		return ""
	case p.index != nil:
		return p.parent.String() + "[" + strconv.Itoa(*p.index) + "]"
	}
	return p.parent.key(p.name)
}

// key names the table key k below p.
func (p *headerPath) key(k string) string {
	if p == nil {
		return strconv.Quote(k)
	}
	return p.String() + "." + strconv.Quote(k)
}

func decodeKey(k string) (string, error) {
	switch {
	case strings.HasPrefix(k, keyTagPrefix):
		b, err := base64.StdEncoding.DecodeString(k[len(keyTagPrefix):])
		if err != nil {
			return "", fmt.Errorf("bad base64 in key: %w", err)
		}
		return string(b), nil
	case strings.HasPrefix(k, "$$"):
		return k[1:], nil
	case strings.HasPrefix(k, "$"):
		return "", errors.New("key begins with a single $ but is not a tag")
	default:
		return k, nil
	}
}

func decodeValue(v any, path *headerPath) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case json.Number:
		return decodeNumber(x, path)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			d, err := decodeValue(e, &headerPath{parent: path, index: &i})
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	case map[string]any:
		tag, ok := tagOf(x)
		if !ok {
			return decodeTable(x, path)
		}
		d, err := decodeTagged(tag, x[tag])
		if err != nil {
			return nil, fmt.Errorf("decode headers: %s: %s: %w", path, tag, err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("decode headers: %s: unexpected %T", path, v)
}

func decodeNumber(n json.Number, path *headerPath) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("decode headers: %s: number %s: %w", path, s, err)
	}
	return f, nil
}

func decodeTagged(tag string, v any) (any, error) {
	if n, ok := narrowInts[tag]; ok {
		i, err := decodeBoundedInt(v, n.lo, n.hi)
		if err != nil {
			return nil, err
		}
		return n.typed(i), nil
	}
	if tag == tagDecimal {
		obj, ok := v.(map[string]any)
		if !ok || len(obj) != 2 {
			return nil, errors.New(`want {"scale":N,"value":N}`)
		}
		scale, err1 := decodeBoundedInt(obj["scale"], 0, math.MaxUint8)
		value, err2 := decodeBoundedInt(obj["value"], math.MinInt32, math.MaxInt32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return amqp.Decimal{Scale: uint8(scale), Value: int32(value)}, nil
	}
	if tag == tagSQS {
		return decodeSQSAttribute(v)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("want a string, got %s", jsonKind(v))
	}
	switch tag {
	case tagBytes:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, err
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case tagString:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case tagTime:
		return parseHeaderTime(s)
	case tagFloat:
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "+Inf":
			return math.Inf(1), nil
		case "-Inf":
			return math.Inf(-1), nil
		case "-0":
			return math.Copysign(0, -1), nil
		}
		return nil, fmt.Errorf("unknown special float %q", s)
	case tagFloat32:
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return nil, fmt.Errorf("bad float %q", s)
		}
		return float32(f), nil
	case tagUnsupported:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown tag %q", tag)
}

// decodeSQSAttribute reverses appendSQSAttribute's tagged form.
func decodeSQSAttribute(v any) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 2 {
		return nil, errors.New(`want {"type":T,"string"|"bytes"|"string_bytes":V}`)
	}
	dataType, ok := obj["type"].(string)
	if !ok {
		return nil, errors.New("want the attribute's type as a string")
	}
	a := SQSAttribute{DataType: dataType}
	for k, raw := range obj {
		if k == "type" {
			continue
		}
		text, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("want %q as a string, got %s", k, jsonKind(raw))
		}
		switch k {
		case "string":
			a.StringValue = text
		case "bytes", "string_bytes":
			b, err := base64.StdEncoding.DecodeString(text)
			if err != nil {
				return nil, err
			}
			if k == "bytes" {
				a.BinaryValue = append([]byte{}, b...)
			} else {
				a.StringValue = string(b)
			}
		default:
			return nil, fmt.Errorf("unknown member %q", k)
		}
	}
	return a, nil
}

// narrowInts are the integer tags: their range and the Go type amqp091-go
// writes as that wire type.
var narrowInts = map[string]struct {
	lo, hi int64
	typed  func(int64) any
}{
	tagInt8:   {math.MinInt8, math.MaxInt8, func(i int64) any { return int8(i) }},
	tagUint8:  {0, math.MaxUint8, func(i int64) any { return uint8(i) }},
	tagInt16:  {math.MinInt16, math.MaxInt16, func(i int64) any { return int16(i) }},
	tagUint16: {0, math.MaxUint16, func(i int64) any { return uint16(i) }},
	tagInt32:  {math.MinInt32, math.MaxInt32, func(i int64) any { return int32(i) }},
	tagUint32: {0, math.MaxUint32, func(i int64) any { return uint32(i) }},
}

func decodeBoundedInt(v any, lo, hi int64) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %s", jsonKind(v))
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < lo || i > hi {
		return 0, fmt.Errorf("want an integer in [%d, %d], got %s", lo, hi, n)
	}
	return i, nil
}

func parseHeaderTime(s string) (time.Time, error) {
	rest, ok := strings.CutPrefix(s, "@")
	if !ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, err
		}
		return t.UTC(), nil
	}
	secText, nsText, hasNanos := strings.Cut(rest, ".")
	sec, err := strconv.ParseInt(secText, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad unix seconds %q", s)
	}
	var ns int64
	if hasNanos {
		if len(nsText) != 9 {
			return time.Time{}, fmt.Errorf("bad nanoseconds in %q", s)
		}
		if ns, err = strconv.ParseInt(nsText, 10, 64); err != nil || ns < 0 {
			return time.Time{}, fmt.Errorf("bad nanoseconds in %q", s)
		}
	}
	return time.Unix(sec, ns).UTC(), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
