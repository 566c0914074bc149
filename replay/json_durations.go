package replay

import (
	"encoding/json"

	"github.com/expiryctl/expiryctl/deadletter"
)

// The JSON of the policy and of a request's stop conditions carries each
// duration as a number of seconds under a name ending in _seconds, as the
// rest of expiryctl's JSON does, rather than as time.Duration's
// nanoseconds under a name that says nothing of its unit. The Go fields
// stay time.Durations, tagged "-", and each type's JSON is its other
// fields (through a copy of the type without its methods) plus these.

type policyFields Policy

type policyJSON struct {
	policyFields
	ApprovalTTL   deadletter.Seconds `json:"approval_ttl_seconds"`
	CanaryWindow  deadletter.Seconds `json:"canary_window_seconds"`
	OutcomeWindow deadletter.Seconds `json:"outcome_window_seconds"`
	Retention     deadletter.Seconds `json:"retention_seconds"`
}

// MarshalJSON writes the policy with its durations in seconds.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{policyFields(p), deadletter.Seconds(p.ApprovalTTL), deadletter.Seconds(p.CanaryWindow),
		deadletter.Seconds(p.OutcomeWindow), deadletter.Seconds(p.Retention)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var w policyJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Policy(w.policyFields)
	p.ApprovalTTL, p.CanaryWindow = w.ApprovalTTL.Duration(), w.CanaryWindow.Duration()
	p.OutcomeWindow, p.Retention = w.OutcomeWindow.Duration(), w.Retention.Duration()
	return nil
}

type stopFields StopConditions

type stopJSON struct {
	stopFields
	CanaryWindow deadletter.Seconds `json:"canary_window_seconds"`
}

// MarshalJSON writes the stop conditions with the canary window in seconds.
func (s StopConditions) MarshalJSON() ([]byte, error) {
	return json.Marshal(stopJSON{stopFields(s), deadletter.Seconds(s.CanaryWindow)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *StopConditions) UnmarshalJSON(b []byte) error {
	var w stopJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = StopConditions(w.stopFields)
	s.CanaryWindow = w.CanaryWindow.Duration()
	return nil
}
