package letterview

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
)

// HeaderLine is one stored header made safe to print: Key and Value are on
// one line each and every control character or escape sequence in them is
// escaped (see termsafe), so that a hostile header cannot drive a terminal.
type HeaderLine struct {
	Key   string
	Value string
}

// HeaderLines decodes stored headers (EncodeHeaders' form) into display
// lines sorted by key: strings Go-quoted (termsafe.Quote), so that a quote
// or backslash inside reads unambiguously; byte arrays as quoted text or hex;
// decimals as their decimal value; times in RFC 3339; tables and arrays
// inline. `dlq show` and the terminal UI print
// them the same way.
func HeaderLines(raw json.RawMessage) ([]HeaderLine, error) {
	headers, err := deadletter.DecodeHeaders(raw)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]HeaderLine, len(keys))
	for i, k := range keys {
		lines[i] = HeaderLine{Key: termsafe.EscapeLine(k), Value: headerDisplay(headers[k])}
	}
	return lines, nil
}

// PropertyLines returns the properties p holds as display lines, in the
// order of the AMQP spec, escaped as HeaderLines escapes headers. A
// timestamp is shown as its wire value and as the time it is read as.
func PropertyLines(p deadletter.Properties) []HeaderLine {
	var lines []HeaderLine
	text := func(key, v string) {
		if v != "" {
			lines = append(lines, HeaderLine{Key: key, Value: termsafe.Quote(v)})
		}
	}
	text("content_type", p.ContentType)
	text("content_encoding", p.ContentEncoding)
	switch p.DeliveryMode {
	case 0:
	case 1:
		lines = append(lines, HeaderLine{Key: "delivery_mode", Value: "1 (transient)"})
	case 2:
		lines = append(lines, HeaderLine{Key: "delivery_mode", Value: "2 (persistent)"})
	default:
		lines = append(lines, HeaderLine{Key: "delivery_mode", Value: fmt.Sprint(p.DeliveryMode)})
	}
	if p.Priority != 0 {
		lines = append(lines, HeaderLine{Key: "priority", Value: fmt.Sprint(p.Priority)})
	}
	text("correlation_id", p.CorrelationID)
	text("reply_to", p.ReplyTo)
	text("expiration", p.Expiration)
	text("message_id", p.MessageID)
	if p.Timestamp != nil {
		value := fmt.Sprint(*p.Timestamp)
		if t, millis, ok := p.SentAt(); ok {
			unit := "seconds"
			if millis {
				unit = "milliseconds"
			}
			value += fmt.Sprintf(" (%s, read as %s)", t.UTC().Format(time.RFC3339Nano), unit)
		}
		lines = append(lines, HeaderLine{Key: "timestamp", Value: value})
	}
	text("type", p.Type)
	text("user_id", p.UserID)
	text("app_id", p.AppID)
	return lines
}

func headerDisplay(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return termsafe.Quote(x)
	case []byte:
		if termsafe.IsText(x) {
			return "bytes " + termsafe.Quote(string(x))
		}
		return fmt.Sprintf("bytes %x", x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case amqp.Decimal:
		// Marked like the narrow integers: a decimal 12.345 and a double
		// 12.345 are different wire types, and a replay keeps which.
		return decimalText(x) + " (decimal)"
	case deadletter.SQSAttribute:
		if x.Binary() {
			if termsafe.IsText(x.BinaryValue) {
				return termsafe.EscapeLine(x.DataType) + " " + termsafe.Quote(string(x.BinaryValue))
			}
			return fmt.Sprintf("%s %x", termsafe.EscapeLine(x.DataType), x.BinaryValue)
		}
		return termsafe.EscapeLine(x.DataType) + " " + termsafe.Quote(x.StringValue)
	case int8, uint8, int16, uint16, int32, uint32, float32:
		// Longs and doubles, the types most headers have, go unmarked.
		return fmt.Sprintf("%v (%T)", x, x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = headerDisplay(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	// Nested tables are amqp091.Table, a map[string]any by another name.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = termsafe.EscapeLine(k) + "=" + headerDisplay(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface())
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return termsafe.EscapeLine(fmt.Sprint(v))
}

// decimalText writes an AMQP decimal, Value × 10^-Scale, in plain decimal
// notation with every digit its scale says it has ("1.20" for 120 at scale
// 2), since a decimal's scale is part of its value on the wire.
func decimalText(d amqp.Decimal) string {
	digits := strconv.FormatInt(int64(d.Value), 10)
	sign := ""
	if digits[0] == '-' {
		sign, digits = "-", digits[1:]
	}
	scale := int(d.Scale)
	if scale == 0 {
		return sign + digits
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}
