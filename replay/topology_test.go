package replay

import "testing"

// TestDepthQueueIsTheWorkQueue: the headroom stop condition reads the queue
// a replay fills. A letter that went through retries died in a retry queue
// (its x-death names reservation-expiry.retry.1000), but its replay lands
// in the work queue, whether through the default exchange or the original
// one.
func TestDepthQueueIsTheWorkQueue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		item runItem
		want string
	}{
		{"through the exchange, died in a retry queue", runItem{hasTarget: true, exchange: "reservations", routingKey: "reservation.expire",
			originQueue: "reservation-expiry.retry.1000"}, "reservation-expiry"},
		{"through the exchange, died in the work queue", runItem{hasTarget: true, exchange: "reservations", originQueue: "reservation-expiry"}, "reservation-expiry"},
		{"back to the queue it failed in", runItem{hasTarget: true, exchange: "", routingKey: "reservation-expiry",
			originQueue: "reservation-expiry.retry.1000"}, "reservation-expiry"},
		{"the request's queue", runItem{hasTarget: true, routingKey: "fallback"}, "fallback"},
		{"through an exchange, no queue known", runItem{hasTarget: true, exchange: "reservations", routingKey: "k"}, ""},
		{"a queue named like a dlq only", runItem{originQueue: ".dlq"}, ".dlq"},
	} {
		if got := c.item.depthQueue(); got != c.want {
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
