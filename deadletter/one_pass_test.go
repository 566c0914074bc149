package deadletter

import (
	"reflect"
	"testing"
)

// holdOnePassToEncodingJSON fuzzes a one-pass reading against
// encoding/json's: whatever onePass reads, byEncodingJSON reads the same,
// without an error. What onePass refuses goes to encoding/json anyway.
func holdOnePassToEncodingJSON[T any](f *testing.F, seeds []string, onePass, byEncodingJSON func([]byte) (T, error)) {
	for _, raw := range seeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, err := onePass(raw)
		if err != nil {
			return
		}
		slow, err := byEncodingJSON(raw)
		if err != nil {
			t.Fatalf("the one pass read %q, encoding/json says %v", raw, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the one pass read %#v, encoding/json %#v", raw, fast, slow)
		}
	})
}
