package broker_test

import (
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/deadletter"
)

// TestQueueReportStates: a retry queue's and the DLQ's delivered messages
// still count as scheduled and isolated; the work queue's split into ready
// and in flight.
func TestQueueReportStates(t *testing.T) {
	t.Parallel()
	ready, isolated := 12*time.Second, 90*time.Second
	r := deadletter.QueueReport{Queues: []deadletter.QueueState{
		{Name: "w", Role: deadletter.RoleWork, Ready: 3, Unacked: 2, Consumers: 1, HeadAge: &ready},
		{Name: "w.retry.1000", Role: deadletter.RoleRetry, Ready: 4, Unacked: 1},
		{Name: "w.retry.5000", Role: deadletter.RoleRetry, Ready: 2},
		{Name: "w.dlq", Role: deadletter.RoleDeadLetter, Ready: 6, Unacked: 1, HeadAge: &isolated},
	}}
	got := r.States()
	want := deadletter.WorkStates{Scheduled: 7, RetryQueues: 2, Ready: 3, InFlight: 2, Consumers: 1, ReadyHeadAge: &ready,
		Isolated: 7, IsolatedHeadAge: &isolated}
	if got != want {
		t.Fatalf("States() = %+v, want %+v", got, want)
	}
	if empty := (deadletter.QueueReport{Unavailable: "down"}).States(); empty != (deadletter.WorkStates{}) {
		t.Fatalf("an unavailable report's states = %+v, want none", empty)
	}
}
