// Package sqsqueue is expiryctl's Amazon SQS driver: naming a queue
// (QueueRef: sqs://NAME or a queue URL), a client that backs off and
// retries SQS's throttling and 5xx answers, and the dead-letter queue
// consumer that deadletter's ingest reads (DLQSource, a deadletter.Source),
// which deletes a message only once the batch holding it committed and
// extends the visibility of those it still holds. The domain packages own
// the interfaces and do not import this package.
package sqsqueue
