package replay_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/replay"
)

func TestJSONDurationsAreSeconds(t *testing.T) {
	t.Parallel()
	policy := replay.Policy{Approvers: []string{"bob"}, MaxRate: 20, ApprovalTTL: time.Hour, CanaryWindow: 1500 * time.Millisecond,
		OutcomeWindow: 5 * time.Minute, Retention: 90 * 24 * time.Hour, UpdatedAt: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	stop := replay.StopConditions{FailureRatio: 0.05, QueueDepth: 100, RedeadRatio: 0.2, CanaryWindow: 30 * time.Second}
	for _, c := range []struct {
		name    string
		value   any
		decoded any
		want    map[string]any
	}{
		{"policy", policy, &replay.Policy{}, map[string]any{"approval_ttl_seconds": 3600.0, "canary_window_seconds": 1.5,
			"outcome_window_seconds": 300.0, "retention_seconds": 7776000.0, "max_rate": 20.0, "approvers": []any{"bob"},
			"updated_at": "2026-11-30T03:00:00Z"}},
		{"stop conditions", stop, &replay.StopConditions{}, map[string]any{"canary_window_seconds": 30.0, "failure_ratio": 0.05,
			"queue_depth": 100.0, "redead_ratio": 0.2}},
	} {
		b, err := json.Marshal(c.value)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for k, want := range c.want {
			if !reflect.DeepEqual(raw[k], want) {
				t.Errorf("%s: %s = %#v, want %#v in %s", c.name, k, raw[k], want, b)
			}
		}
		for _, old := range []string{"approval_ttl", "canary_window", "outcome_window", "retention", "ApprovalTTL", "CanaryWindow"} {
			if _, ok := raw[old]; ok {
				t.Errorf("%s: JSON still has %q: %s", c.name, old, b)
			}
		}
		// Go readers of -o json get the durations back.
		if err := json.Unmarshal(b, c.decoded); err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(c.decoded).Elem().Interface(); !reflect.DeepEqual(got, c.value) {
			t.Errorf("%s: round trip = %+v, want %+v", c.name, got, c.value)
		}
	}
	// A request carries its stop conditions so.
	b, err := json.Marshal(replay.Request{ID: 7, Stop: stop})
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Stop map[string]any `json:"stop_conditions"`
	}
	if err := json.Unmarshal(b, &req); err != nil || req.Stop["canary_window_seconds"] != 30.0 {
		t.Errorf("request JSON stop_conditions = %v, %v: %s", req.Stop, err, b)
	}
}
