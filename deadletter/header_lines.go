package deadletter

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/expiryctl/expiryctl/termsafe"
)

// HeaderLine is one stored header made safe to print: Key and Value are on
// one line each and every control character or escape sequence in them is
// escaped (see termsafe), so that a hostile header cannot drive a terminal.
type HeaderLine struct {
	Key   string
	Value string
}

// HeaderLines decodes stored headers (EncodeHeaders' form) into display
// lines sorted by key: strings quoted, byte arrays as text or hex, times in
// RFC 3339, tables and arrays inline. `dlq show` and the terminal UI print
// them the same way.
func HeaderLines(raw json.RawMessage) ([]HeaderLine, error) {
	headers, err := DecodeHeaders(raw)
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

func headerDisplay(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return `"` + termsafe.EscapeLine(x) + `"`
	case []byte:
		if termsafe.IsText(x) {
			return "bytes " + termsafe.EscapeLine(string(x))
		}
		return fmt.Sprintf("bytes %x", x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
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
