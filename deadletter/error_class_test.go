package deadletter

import "testing"

// TestErrorClassOfText holds what class a letter without x-error-class
// gets from its error text, as job stores keep it.
func TestErrorClassOfText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ text, want string }{
		{"db_timeout: reservation r-1 lock wait exceeded", "db_timeout"},
		{"Error: db_timeout: reservation r-bull-0 lock wait exceeded", "db_timeout"},
		{"TypeError: payment_gateway_down: 503 from psp", "payment_gateway_down"},
		{"timeout: the reservations database did not answer", "timeout"},
		{"ERROR: deadlock detected (SQLSTATE 40P01)", "deadlock_detected"},
		{"ERROR: canceling statement due to statement timeout (SQLSTATE 57014)", "query_canceled"},
		{"pq: SQLSTATE 0A000 feature not supported", "sqlstate_0a000"},
		{"connect ECONNREFUSED 10.0.0.1:5432", "econnrefused"},
		{"error: connection refused", ""},
		{"reservation r-1 not found: it was deleted", ""},
		{"Error: something went wrong", ""},
		{"", ""},
	} {
		if got := errorClassOfText(c.text); got != c.want {
			t.Errorf("errorClassOfText(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestParseNamesTheClassAStoredJobsTextGives: a job store's letter, which
// has no x-error-class, takes its class from the error its store kept,
// and its category from the class's rules.
func TestParseNamesTheClassAStoredJobsTextGives(t *testing.T) {
	t.Parallel()
	job := StoredJob{System: "bullmq", Queue: "bullmq://redis/bull/q", ID: "7", Incarnation: "1:2", Payload: []byte(`{}`),
		LastError: "db_timeout: reservation r-7 lock wait exceeded", Errors: []JobError{{Attempt: 2, Error: "Error: db_timeout: reservation r-7 lock wait exceeded"}}}
	l := Parse(job.Message(), nil, job.FailedAt)
	if l.ErrorClass != "db_timeout" || l.Category != TransientExhausted {
		t.Errorf("class %q, category %s; want db_timeout, transient-exhausted", l.ErrorClass, l.Category)
	}
	withClass := job.Message()
	withClass.Headers[headerErrorClass] = "validation"
	if l := Parse(withClass, nil, job.FailedAt); l.ErrorClass != "validation" {
		t.Errorf("a letter's own x-error-class %q was replaced by the text's", l.ErrorClass)
	}
}
