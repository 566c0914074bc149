package pgboss

import (
	"testing"
	"time"
)

// TestJobErrorReadsWhatPgBossWrites: each shape of output pg-boss writes
// for a failed job gives its error's text and trace; what is none of them
// is kept as it came.
func TestJobErrorReadsWhatPgBossWrites(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, output, error, trace string
	}{
		{"an Error thrown", `{"name": "Error", "stack": "Error: db_timeout\n    at handler (w.js:3:9)", "message": "db_timeout"}`,
			"db_timeout", "Error: db_timeout\n    at handler (w.js:3:9)"},
		{"a string thrown", `{"value": "quota exceeded"}`, "quota exceeded", ""},
		{"expired", `{"value": {"message": "job timed out"}}`, "job timed out", ""},
		{"a number thrown", `{"value": 42}`, "42", ""},
		{"an object with no message", `{"code": "E42"}`, `{"code": "E42"}`, ""},
		{"an empty message", `{"message": "", "stack": "Error\n    at x"}`, `{"message": "", "stack": "Error\n    at x"}`, "Error\n    at x"},
		{"not an object", `"plain"`, `"plain"`, ""},
		{"none", ``, "", ""},
		{"null", `null`, "", ""},
	} {
		out := tt.output
		got := jobError(&out)
		if got.Error != tt.error || got.Trace != tt.trace {
			t.Errorf("%s: jobError(%s) = %q, trace %q; want %q, trace %q", tt.name, tt.output, got.Error, got.Trace, tt.error, tt.trace)
		}
	}
	if got := jobError(nil); got.Error != "" {
		t.Errorf("jobError(nil) = %q", got.Error)
	}
}

// TestAttemptsCountFetches: pg-boss adds one to retry_count on each fetch
// after the first, and a job never fetched never ran.
func TestAttemptsCountFetches(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if got := attempts(0, nil); got != 0 {
		t.Errorf("never started: %d attempts", got)
	}
	if got := attempts(0, &now); got != 1 {
		t.Errorf("started once: %d attempts", got)
	}
	if got := attempts(2, &now); got != 3 {
		t.Errorf("retried twice: %d attempts", got)
	}
}

func TestIncarnationIsMicrosecondsInUTC(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	if got := Incarnation(at); got != "2026-12-01T09:00:00.123456Z" {
		t.Errorf("Incarnation = %s", got)
	}
}
