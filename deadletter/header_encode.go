package deadletter

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// encodeHeaderEntries encodes each top-level header on its own, sorted, so
// that callers can both store the whole table and hash a subset of it without
// encoding twice.
func encodeHeaderEntries(h map[string]any) []headerEntry {
	entries := make([]headerEntry, 0, len(h))
	// One buffer for all entries rather than one each, since this runs for
	// every captured letter; an entry cut before the buffer grew keeps the
	// array it was cut from, and its capped capacity stops appends into it.
	buf := make([]byte, 0, 160*len(h))
	for k, v := range h {
		ek := encodeKey(k)
		start := len(buf)
		buf = appendJSONString(buf, ek)
		buf = append(buf, ':')
		prefix := len(buf)
		w := headerWriter{}
		buf = w.value(buf, v, 1)
		e := headerEntry{key: k, json: buf[start:len(buf):len(buf)], order: ek}
		if w.narrow {
			untyped := headerWriter{untyped: true}
			e.untyped = untyped.value(append([]byte(nil), buf[start:prefix]...), v, 1)
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b headerEntry) int { return strings.Compare(a.order, b.order) })
	return entries
}

// headerWriter writes header values in EncodeHeaders' encoding straight
// into a buffer, objects with their keys sorted, as encoding/json would but
// without building a tree for it: this runs for every captured letter.
type headerWriter struct {
	// untyped writes the narrow wire types as plain numbers, as the
	// encoding did before it had their tags; the fingerprint hashes that.
	untyped bool
	// narrow is set once a narrow integer or a float32 was written.
	narrow bool
}

func (w *headerWriter) value(dst []byte, v any, depth int) []byte {
	if depth > maxHeaderDepth {
		return appendTagged(dst, tagUnsupported, "nesting deeper than "+strconv.Itoa(maxHeaderDepth))
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendHeaderString(dst, x)
	case []byte:
		return appendBase64Tagged(dst, tagBytes, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10)
	case int8:
		return w.narrowInt(dst, tagInt8, int64(x))
	case int16:
		return w.narrowInt(dst, tagInt16, int64(x))
	case int32:
		return w.narrowInt(dst, tagInt32, int64(x))
	case uint8:
		return w.narrowInt(dst, tagUint8, int64(x))
	case uint16:
		return w.narrowInt(dst, tagUint16, int64(x))
	case uint32:
		return w.narrowInt(dst, tagUint32, int64(x))
	case float32:
		w.narrow = true
		if w.untyped {
			return appendFloat(dst, float64(x))
		}
		return appendTagged(dst, tagFloat32, strconv.FormatFloat(float64(x), 'g', -1, 32))
	case float64:
		return appendFloat(dst, x)
	case time.Time:
		dst = append(dst, `{"`+tagTime+`":"`...)
		return append(appendHeaderTime(dst, x), `"}`...)
	case amqp.Decimal:
		dst = append(dst, `{"`+tagDecimal+`":{"scale":`...)
		dst = strconv.AppendUint(dst, uint64(x.Scale), 10)
		dst = append(dst, `,"value":`...)
		dst = strconv.AppendInt(dst, int64(x.Value), 10)
		return append(dst, "}}"...)
	case SQSAttribute:
		return appendSQSAttribute(dst, x)
	case amqp.Table:
		return w.table(dst, x, depth)
	case map[string]any:
		return w.table(dst, x, depth)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.value(dst, e, depth+1)
		}
		return append(dst, ']')
	}
	return w.reflected(dst, v, depth)
}

func (w *headerWriter) narrowInt(dst []byte, tag string, n int64) []byte {
	w.narrow = true
	if w.untyped {
		return strconv.AppendInt(dst, n, 10)
	}
	dst = append(dst, `{"`...)
	dst = append(dst, tag...)
	dst = append(dst, `":`...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '}')
}

// tableKey is a table's key as received and as encoded, which orders it.
type tableKey struct{ encoded, raw string }

func (w *headerWriter) table(dst []byte, t map[string]any, depth int) []byte {
	keys := make([]tableKey, 0, len(t))
	for k := range t {
		keys = append(keys, tableKey{encodeKey(k), k})
	}
	slices.SortFunc(keys, func(a, b tableKey) int { return strings.Compare(a.encoded, b.encoded) })
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k.encoded)
		dst = append(dst, ':')
		dst = w.value(dst, t[k.raw], depth+1)
	}
	return append(dst, '}')
}

// reflected covers what amqp091-go never produces but a Go caller may
// hand over: []amqp.Table, []string, named string types, pointers. Anything
// without an AMQP equivalent becomes an $unsupported tag rather than an
// error, because capture must not fail on a header. Named numeric types
// are written plain, as longs and doubles.
func (w *headerWriter) reflected(dst []byte, v any, depth int) []byte {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return strconv.AppendBool(dst, rv.Bool())
	case reflect.String:
		return appendHeaderString(dst, rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(dst, rv.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return appendFloat(dst, rv.Float())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			return appendBase64Tagged(dst, tagBytes, rv.Bytes())
		}
		dst = append(dst, '[')
		for i := range rv.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.value(dst, rv.Index(i).Interface(), depth+1)
		}
		return append(dst, ']')
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		t := make(map[string]any, rv.Len())
		for iter := rv.MapRange(); iter.Next(); {
			t[iter.Key().String()] = iter.Value().Interface()
		}
		return w.table(dst, t, depth)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return append(dst, "null"...)
		}
		return w.value(dst, rv.Elem().Interface(), depth+1)
	}
	return appendTagged(dst, tagUnsupported, fmt.Sprintf("%T", v))
}

// appendSQSAttribute writes an SQS message attribute: a String attribute
// whose value jsonb can hold plain, as a letter from RabbitMQ's string
// header reads, and any other tagged with its type and value.
func appendSQSAttribute(dst []byte, a SQSAttribute) []byte {
	if a.DataType == "String" && jsonbSafe(a.StringValue) {
		return appendJSONString(dst, a.StringValue)
	}
	dst = append(dst, `{"`+tagSQS+`":{`...)
	switch {
	case a.Binary():
		dst = append(dst, `"bytes":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, a.BinaryValue)
		dst = append(dst, `",`...)
	case jsonbSafe(a.StringValue):
		dst = append(dst, `"string":`...)
		dst = appendJSONString(dst, a.StringValue)
		dst = append(dst, ',')
	default:
		dst = append(dst, `"string_bytes":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, []byte(a.StringValue))
		dst = append(dst, `",`...)
	}
	// SQS allows only letters, digits, "_", "-" and "." in a type name;
	// another server's odd one is kept readable rather than exact.
	dst = append(dst, `"type":`...)
	dst = appendJSONString(dst, SafeText(a.DataType))
	return append(dst, "}}"...)
}

// appendHeaderString writes s plain when jsonb can hold it, else tagged
// with its bytes.
func appendHeaderString(dst []byte, s string) []byte {
	if jsonbSafe(s) {
		return appendJSONString(dst, s)
	}
	return appendBase64Tagged(dst, tagString, []byte(s))
}

// appendTagged writes {"<tag>":"<text>"}; text is valid UTF-8.
func appendTagged(dst []byte, tag, text string) []byte {
	dst = append(dst, `{"`...)
	dst = append(dst, tag...)
	dst = append(dst, `":`...)
	dst = appendJSONString(dst, text)
	return append(dst, '}')
}

func appendBase64Tagged(dst []byte, tag string, b []byte) []byte {
	dst = append(dst, `{"`...)
	dst = append(dst, tag...)
	dst = append(dst, `":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, `"}`...)
}

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return appendTagged(dst, tagFloat, "NaN")
	case math.IsInf(f, 1):
		return appendTagged(dst, tagFloat, "+Inf")
	case math.IsInf(f, -1):
		return appendTagged(dst, tagFloat, "-Inf")
	case f == 0 && math.Signbit(f):
		// numeric has no negative zero; jsonb would turn -0.0 into 0.0.
		return appendTagged(dst, tagFloat, "-0")
	}
	// 'f' rather than 'g': jsonb rewrites 1e+21 as a plain integer, which
	// would then decode as int64. The shortest digits that round-trip keep
	// float32 values exact once widened to float64.
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !slices.Contains(dst[start:], '.') {
		dst = append(dst, ".0"...)
	}
	return dst
}

// appendHeaderTime writes t in UTC as RFC 3339, or as "@<unix>.<nanos>"
// outside the years 0-9999: AMQP timestamps are any 64-bit second count,
// and RFC 3339 has only four digits for the year.
func appendHeaderTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if y := t.Year(); y >= 0 && y <= 9999 {
		return t.AppendFormat(dst, time.RFC3339Nano)
	}
	dst = append(dst, '@')
	dst = strconv.AppendInt(dst, t.Unix(), 10)
	if ns := t.Nanosecond(); ns != 0 {
		dst = fmt.Appendf(dst, ".%09d", ns)
	}
	return dst
}
