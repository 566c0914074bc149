package broker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

func TestQueueStateJSONHeadAgeIsSeconds(t *testing.T) {
	t.Parallel()
	age := 90 * time.Second
	b, err := json.Marshal(deadletter.QueueState{Name: "q", Role: deadletter.RoleDeadLetter, Ready: 7, HeadAge: &age})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"head_age_seconds":90`) || strings.Contains(string(b), `"head_age"`) || !strings.Contains(string(b), `"ready":7`) {
		t.Errorf("queue state JSON = %s, want head_age_seconds 90", b)
	}
	b, _ = json.Marshal(deadletter.QueueState{Name: "q"})
	if strings.Contains(string(b), "head_age") {
		t.Errorf("queue state without a head age = %s, want none", b)
	}
}
