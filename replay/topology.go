package replay

import "regexp"

// topologySuffix is how a retry or dead-letter queue's name extends its
// work queue's in the expiry topology (docs/message-contract.md): the work
// queue Q has retry queues Q.retry.<ms> and the dead-letter queue Q.dlq.
var topologySuffix = regexp.MustCompile(`(\.retry\.[0-9]+|\.dlq)$`)

// WorkQueueOf returns the work queue that queue belongs to: queue without
// its ".retry.<ms>" or ".dlq" suffix, or queue itself. A letter names the
// queue it died in, which in a retry topology is a retry queue; a replay of
// it lands in the work queue, whose depth and consumers are the ones that
// matter.
func WorkQueueOf(queue string) string {
	if work := topologySuffix.ReplaceAllString(queue, ""); work != "" {
		return work
	}
	return queue
}
