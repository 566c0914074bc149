package replay

import "testing"

// TestDepthQueueIsTheWorkQueue: the headroom stop condition reads the queue
// a replay fills. A letter that went through retries died in a retry queue
// (its x-death names reservation-expiry.retry.1000), but its replay goes to
// the original exchange and lands in the work queue.
func TestDepthQueueIsTheWorkQueue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		item runItem
		req  Request
		want string
	}{
		{"died in a retry queue", runItem{hasOrigin: true, exchange: "reservations", routingKey: "reservation.expire",
			originQueue: "reservation-expiry.retry.1000"}, Request{}, "reservation-expiry"},
		{"died in the work queue", runItem{hasOrigin: true, exchange: "reservations", originQueue: "reservation-expiry"}, Request{}, "reservation-expiry"},
		{"routed by queue name", runItem{hasOrigin: true, exchange: "", routingKey: "jobs.retry.5000"}, Request{}, "jobs.retry.5000"},
		{"no origin, the request's queue", runItem{}, Request{ToRoutingKey: "fallback"}, "fallback"},
		{"a queue named like a dlq only", runItem{originQueue: ".dlq"}, Request{}, ".dlq"},
	} {
		if got := c.item.depthQueue(c.req); got != c.want {
			t.Errorf("%s: depth queue %q, want %q", c.name, got, c.want)
		}
	}
}

func TestWorkQueueOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"reservation-expiry": "reservation-expiry", "reservation-expiry.retry.1000": "reservation-expiry",
		"reservation-expiry.dlq": "reservation-expiry", "q.retry.soon": "q.retry.soon", ".dlq": ".dlq", "a.dlq.old": "a.dlq.old",
		"odd": "odd",
	} {
		if got := WorkQueueOf(in); got != want {
			t.Errorf("WorkQueueOf(%q) = %q, want %q", in, got, want)
		}
	}
}
