package replay

import "context"

// Flow reads how busy the consumers of a target queue are, from its
// system's live view. The plan (Service.Plan) sizes a replay's rate with it
// and the runner (Runner.Flow) paces a run by it. A driver whose system
// measures a queue's traffic implements it; for another, the answer's
// Unavailable says the system shows none.
type Flow interface {
	// QueueFlow returns the traffic of the work queue that queue belongs
	// to: queue itself, or the work queue whose retry queue
	// ("<work>.retry.<ms>") or dead-letter queue ("<work>.dlq") it names.
	// A live view that cannot be read, or a work queue that does not
	// exist, is not an error: the answer's Unavailable says what is
	// missing. The error is ctx's.
	QueueFlow(ctx context.Context, queue string) (QueueFlow, error)
}

// QueueFlow is the traffic of one work queue and its retry queues, as the
// system's live view samples it (rates per second over its last sampling
// interval, which lags the queues by up to that interval). A rate the broker does not report, because nothing
// moved since it began sampling the queue, is 0.
type QueueFlow struct {
	// Queue is the work queue read.
	Queue string `json:"queue"`
	// Ready are messages waiting for a consumer; Consumers its consumers.
	Ready     int64 `json:"ready"`
	Consumers int   `json:"consumers"`
	// PublishRate counts messages published into the work queue by
	// clients: producers and replays. A broker does not count a message
	// dead-lettered into a queue as a publish, so retries coming back from
	// their retry queues are not in it.
	PublishRate float64 `json:"publish_rate"`
	// DeliverRate counts deliveries to consumers (and basic.get): every
	// attempt, first or retried.
	DeliverRate float64 `json:"deliver_rate"`
	// AckRate counts the consumers' acknowledgements: the attempts they
	// finished, whatever the outcome (a worker acks a delivery it
	// rescheduled or dead-lettered too).
	AckRate float64 `json:"ack_rate"`
	// RetryPublishRate sums the publishes into the retry queues: attempts
	// that failed transiently and were scheduled again.
	RetryPublishRate float64 `json:"retry_publish_rate"`
	// RetryQueues counts the retry queues found.
	RetryQueues int `json:"retry_queues"`
	// Unavailable, when set, says why nothing else could be read.
	Unavailable string `json:"unavailable,omitempty"`
}
