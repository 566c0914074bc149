package deadletter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testLetter is a letter with only what Classify looks at.
func testLetter(class, lastError string, reasons ...string) *Letter {
	l := &Letter{ErrorClass: class, LastError: lastError}
	for _, r := range reasons {
		l.Deaths = append(l.Deaths, Death{Reason: r, Count: 1})
	}
	return l
}

func TestDefaultClassifierErrorClasses(t *testing.T) {
	t.Parallel()
	tests := map[string]Category{
		"db_timeout": TransientExhausted, "DB-Timeout": TransientExhausted, "db timeout": TransientExhausted,
		"timeout": TransientExhausted, "connection_lost": TransientExhausted, "connection-refused": TransientExhausted,
		"connection_reset": TransientExhausted, "unavailable": TransientExhausted, "throttled": TransientExhausted,
		"rate_limited": TransientExhausted, "too_many_requests": TransientExhausted, "429": TransientExhausted,
		"deadlock": TransientExhausted, "lock_timeout": TransientExhausted, "lock_not_available": TransientExhausted,
		"serialization_failure": TransientExhausted, "transient": TransientExhausted, "broker_unavailable": TransientExhausted,
		" Transient ": TransientExhausted,
		"validation":  Validation, "invalid": Validation, "bad_request": Validation, "schema": Validation,
		"not_found": NotFound, "Not-Found": NotFound, "missing": NotFound, "404": NotFound,
		"version_conflict": Conflict, "conflict": Conflict, "stale_version": Conflict, "409": Conflict,
		"malformed": Malformed, "decode": Malformed, "unmarshal": Malformed, "parse_error": Malformed,
		// Unlisted classes fall through to the patterns, tried on the class too.
		"upstream_timeout": TransientExhausted, "validation_failed": Validation,
		"payment_gateway_down": Unknown, "500": Unknown,
		// Node.js system error codes, as err.code gives them.
		"ETIMEDOUT": TransientExhausted, "ESOCKETTIMEDOUT": TransientExhausted, "ECONNREFUSED": TransientExhausted,
		"ECONNRESET": TransientExhausted, "ECONNABORTED": TransientExhausted, "EHOSTUNREACH": TransientExhausted,
		"EAI_AGAIN": TransientExhausted, "EPIPE": TransientExhausted, "ENOTFOUND": TransientExhausted,
		"econnrefused": TransientExhausted,
	}
	c := DefaultClassifier()
	for class, want := range tests {
		// x-death says expired, which must not matter once there is a class.
		if got := c.Classify(testLetter(class, "", "expired"), false); got != want {
			t.Errorf("class %q: got %s, want %s", class, got, want)
		}
	}
}

func TestDefaultClassifierErrorText(t *testing.T) {
	t.Parallel()
	tests := map[string]Category{
		"context deadline exceeded":                                  TransientExhausted,
		"read tcp 10.0.0.1:5432: i/o timeout":                        TransientExhausted,
		"query timed out after 5s":                                   TransientExhausted,
		"dial tcp 10.0.0.1:5432: connect: connection refused":        TransientExhausted,
		"read: connection reset by peer":                             TransientExhausted,
		"amqp: connection lost":                                      TransientExhausted,
		"ERROR: deadlock detected (SQLSTATE 40P01)":                  TransientExhausted,
		"could not serialize access due to concurrent update":        TransientExhausted,
		"canceling statement due to lock timeout":                    TransientExhausted,
		"Lock wait timeout exceeded":                                 TransientExhausted,
		"HTTP 429 from payments":                                     TransientExhausted,
		"Too Many Requests":                                          TransientExhausted,
		"request throttled by upstream":                              TransientExhausted,
		"503 Service Unavailable":                                    TransientExhausted,
		"reservation r-8421 not found":                               NotFound,
		"no rows in result set":                                      NotFound,
		"expected version 3 but found 4: version mismatch":           Conflict,
		"optimistic lock: conflict on version 3":                     Conflict,
		"OptimisticLockException on reservation r-8421":              Conflict,
		"lock timeout while checking the version":                    TransientExhausted,
		"reservation not found after timeout":                        TransientExhausted,
		"conflict: stale version":                                    Conflict,
		"invalid hold_until":                                         Validation,
		"validation failed: reservation_id is required":              Validation,
		"request blocked by policy":                                  Unknown, // "blocked" is not a lock
		"reservation r-84291 failed":                                 Unknown, // nor is a 429 inside an id
		"panic: runtime error: index out of range [3] with length 3": Unknown,
		// Node.js err.message texts that carry a system error code.
		"connect ETIMEDOUT 10.0.0.1:5432":             TransientExhausted,
		"connect ECONNREFUSED 127.0.0.1:5432":         TransientExhausted,
		"read ECONNRESET":                             TransientExhausted,
		"getaddrinfo EAI_AGAIN db.internal":           TransientExhausted,
		"write EPIPE":                                 TransientExhausted,
		"getaddrinfo ENOTFOUND db.internal":           TransientExhausted, // DNS, not a missing reservation
		"Error: ESOCKETTIMEDOUT":                      TransientExhausted,
		"socket hang up (ECONNABORTED)":               TransientExhausted,
		"connect EHOSTUNREACH 10.0.0.9:5432":          TransientExhausted,
		"Error: ECONNREFUSEDX is not a code":          Unknown, // whole codes only
		"epipe welding crew reported the reservation": Unknown,
	}
	c := DefaultClassifier()
	for text, want := range tests {
		if got := c.Classify(testLetter("", text, "expired"), false); got != want {
			t.Errorf("error %q: got %s, want %s", text, got, want)
		}
	}
}

func TestDefaultClassifierBrokerReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		l    *Letter
		want Category
	}{
		{"expired", testLetter("", "", "expired"), BrokerExpired},
		{"maxlen", testLetter("", "", "maxlen"), BrokerLimit},
		{"delivery_limit", testLetter("", "", "delivery_limit"), BrokerLimit},
		{"rejected", testLetter("", "", "rejected"), Unknown},
		{"most recent entry decides", testLetter("", "", "maxlen", "expired"), BrokerLimit},
		{"rejected after retry hops", testLetter("", "", "rejected", "expired"), Unknown},
		{"unknown reason", testLetter("", "", "exploded"), Unknown},
		{"empty reason", testLetter("", "", ""), Unknown},
		{"an unrecognised application error is not the broker's doing", testLetter("payment_gateway_down", "", "expired"), Unknown},
		{"nor is unrecognised error text", testLetter("", "something broke", "expired"), Unknown},
		{"no x-death, delivery count only", &Letter{Attempts: 5}, Unknown},
		{"nothing at all", &Letter{}, Unknown},
		{"nil letter", nil, Unknown},
	}
	for _, tt := range tests {
		if got := DefaultClassifier().Classify(tt.l, false); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestClassifyMalformedPayloadWins(t *testing.T) {
	t.Parallel()
	for _, l := range []*Letter{testLetter("db_timeout", "timeout", "expired"), testLetter("", "", "maxlen"), nil} {
		if got := DefaultClassifier().Classify(l, true); got != Malformed {
			t.Errorf("got %s, want malformed", got)
		}
	}
	var nilClassifier *Classifier
	if got := nilClassifier.Classify(testLetter("not_found", ""), false); got != NotFound {
		t.Errorf("nil Classifier: got %s, want the defaults' not-found", got)
	}
}

func writeClassifierFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "classes.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadClassifier(t *testing.T) {
	t.Parallel()
	path := writeClassifierFile(t, `{
		"error_classes": {"payment_gateway_down": "transient-exhausted", "Throttled": "unknown", "missing": "validation"},
		"error_patterns": [
			{"match": "(?i)lock wait", "category": "conflict"},
			{"match": "gateway says no", "category": "validation"}
		],
		"death_reasons": {"rejected": "transient-exhausted", "expired": "broker-limit"}
	}`)
	c, err := LoadClassifier(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		l    *Letter
		want Category
	}{
		{"new class", testLetter("payment-gateway-down", ""), TransientExhausted},
		{"overridden class", testLetter("throttled", ""), Unknown},
		{"another overridden class", testLetter("missing", ""), Validation},
		{"default class kept", testLetter("db_timeout", ""), TransientExhausted},
		{"file pattern before the defaults", testLetter("", "Lock wait timeout exceeded"), Conflict},
		{"new pattern", testLetter("", "the gateway says no"), Validation},
		{"default pattern kept", testLetter("", "deadlock detected"), TransientExhausted},
		{"overridden reason", testLetter("", "", "rejected"), TransientExhausted},
		{"another overridden reason", testLetter("", "", "expired"), BrokerLimit},
		{"default reason kept", testLetter("", "", "maxlen"), BrokerLimit},
	}
	for _, tt := range tests {
		if got := c.Classify(tt.l, false); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	// The shared defaults are untouched.
	if got := DefaultClassifier().Classify(testLetter("throttled", ""), false); got != TransientExhausted {
		t.Errorf("LoadClassifier changed DefaultClassifier: throttled is %s", got)
	}
}

func TestLoadClassifierEmptyFileSections(t *testing.T) {
	t.Parallel()
	c, err := LoadClassifier(writeClassifierFile(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classify(testLetter("db_timeout", ""), false); got != TransientExhausted {
		t.Errorf("got %s", got)
	}
}

func TestLoadClassifierErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{"unknown category for a class", `{"error_classes": {"payment_gateway_down": "transient"}}`,
			[]string{`error_classes["payment_gateway_down"]`, `"transient"`, "valid categories are transient-exhausted, validation"}},
		{"unknown category for a pattern", `{"error_patterns": [{"match": "x", "category": "flaky"}]}`,
			[]string{`error_patterns[0] (match "x")`, `"flaky"`, "valid categories are"}},
		{"unknown category for a reason", `{"death_reasons": {"expired": "expired"}}`,
			[]string{`death_reasons["expired"]`, "valid categories are"}},
		{"bad regexp", `{"error_patterns": [{"match": "(unclosed", "category": "conflict"}]}`,
			[]string{`error_patterns[0] (match "(unclosed")`, "missing closing )"}},
		{"empty pattern", `{"error_patterns": [{"category": "conflict"}]}`, []string{"match is empty"}},
		{"empty class", `{"error_classes": {" ": "conflict"}}`, []string{"error_classes: empty name"}},
		{"conflicting spellings", `{"error_classes": {"db-timeout": "conflict", "db_timeout": "validation"}}`,
			[]string{`"db-timeout" and "db_timeout"`}},
		{"typo in a section name", `{"error_class": {"x": "conflict"}}`, []string{`unknown field "error_class"`}},
		{"not JSON", `error_classes: {}`, []string{"invalid character"}},
		{"trailing data", `{} {}`, []string{"unexpected data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeClassifierFile(t, tt.content)
			_, err := LoadClassifier(path)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, want := range append(tt.want, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
	if _, err := LoadClassifier(filepath.Join(t.TempDir(), "absent.json")); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestClassifyReturnsAKnownCategory(t *testing.T) {
	t.Parallel()
	for _, l := range []*Letter{
		nil, {}, testLetter("db_timeout", ""), testLetter("", "", "expired"), testLetter("?", "?", "?"),
	} {
		for _, malformed := range []bool{false, true} {
			if got := DefaultClassifier().Classify(l, malformed); !slices.Contains(Categories(), got) {
				t.Errorf("Classify returned %q", got)
			}
		}
	}
}
