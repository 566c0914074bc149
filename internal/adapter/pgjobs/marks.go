package pgjobs

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/expiryctl/expiryctl/replay"
)

// Marks is the object of marks a replay wrote on a job (the x-replay-*
// headers of replay.Message, as JSON), nil when raw holds none. Integers
// come back as int64, as the runner sent them, so that capture reads
// x-replay-request and x-replay-count as numbers.
func Marks(raw []byte) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil || obj == nil {
		return nil
	}
	for k, v := range obj {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				obj[k] = i
			} else if f, err := n.Float64(); err == nil {
				obj[k] = f
			}
		}
	}
	return obj
}

// MarkedBy says whether the marks on a job (raw, as Marks reads them)
// name item of request: an earlier publish of that item retried the job.
func MarkedBy(raw []byte, request, item int64) bool {
	m := Marks(raw)
	gotRequest, ok1 := WholeNumber(m[replay.HeaderReplayRequest])
	gotItem, ok2 := WholeNumber(m[replay.HeaderReplayItem])
	return ok1 && ok2 && gotRequest == request && gotItem == item
}

// WholeNumber is v, a mark's or a header's value, as a whole number:
// Marks reads one as int64, a float64 that is one is taken, and so is its
// decimal text.
func WholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}
