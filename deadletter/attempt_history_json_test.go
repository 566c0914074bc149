package deadletter

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestAttemptHistoryJSONIsEncodingJSONs: the history ingest_letters stores
// is the value encoding/json writes for it, field for field, for every
// shape a history takes (worker and broker entries, a job store's, strings
// that need escaping or are not UTF-8, no entries at all).
func TestAttemptHistoryJSONIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	histories := [][]AttemptEvent{
		nil,
		{},
		{{At: at, Source: "worker", ErrorClass: "db_timeout", Error: "timeout: \"quoted\" \\ back\nslash <html> & \u2028 \x01"}},
		{{Source: "broker", Reason: "expired", Queue: "reservation-expiry.retry.30s", Count: 3}},
		{{At: at.UTC(), Source: "worker", Attempt: 4, Trace: "goroutine 1 [running]:\n\tmain.go:12", Error: "bad \xff byte \xe2\x82"}},
		{{Source: ""}, {At: at, Source: "worker"}},
	}
	for _, events := range histories {
		got, err := appendAttemptHistory(nil, events)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(events)
		if err != nil {
			t.Fatal(err)
		}
		if events == nil {
			want = []byte("[]") // stored as an empty history, never JSON null
		}
		var gotValue, wantValue any
		if err := json.Unmarshal(got, &gotValue); err != nil {
			t.Fatalf("%q is not JSON: %v", got, err)
		}
		if err := json.Unmarshal(want, &wantValue); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotValue, wantValue) {
			t.Errorf("history %+v:\n got %s\nwant %s", events, got, want)
		}
	}
	if _, err := appendAttemptHistory(nil, []AttemptEvent{{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}); err == nil {
		t.Error("a year past 9999 was written: encoding/json refuses it")
	}
}
