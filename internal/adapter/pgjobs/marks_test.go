package pgjobs_test

import (
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/pgjobs"
)

func TestMarksReadNumbersAsIntegers(t *testing.T) {
	t.Parallel()
	m := pgjobs.Marks([]byte(`{"x-replay-request": 7, "x-replay-item": 41, "x-replayed-by": "alice", "ratio": 0.5}`))
	if m["x-replay-request"] != int64(7) || m["x-replay-item"] != int64(41) || m["x-replayed-by"] != "alice" || m["ratio"] != 0.5 {
		t.Errorf("marks = %#v", m)
	}
	for _, raw := range []string{``, `null`, `[1]`, `"x"`, `{`} {
		if m := pgjobs.Marks([]byte(raw)); m != nil {
			t.Errorf("Marks(%q) = %v, want nil", raw, m)
		}
	}
	if !pgjobs.MarkedBy([]byte(`{"x-replay-request": 7, "x-replay-item": 41}`), 7, 41) || pgjobs.MarkedBy([]byte(`{"x-replay-request": 7, "x-replay-item": 41}`), 7, 42) {
		t.Error("MarkedBy does not tell the item")
	}
	if pgjobs.MarkedBy(nil, 7, 41) {
		t.Error("MarkedBy found marks on a job with none")
	}
}

func TestWholeNumber(t *testing.T) {
	t.Parallel()
	for _, v := range []any{int64(7), 7, int32(7), 7.0, "7"} {
		if n, ok := pgjobs.WholeNumber(v); !ok || n != 7 {
			t.Errorf("WholeNumber(%#v) = %d, %v; want 7", v, n, ok)
		}
	}
	for _, v := range []any{7.5, "7.5", "seven", nil, true} {
		if n, ok := pgjobs.WholeNumber(v); ok {
			t.Errorf("WholeNumber(%#v) = %d; want none", v, n)
		}
	}
}
