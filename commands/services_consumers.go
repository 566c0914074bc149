package commands

import (
	"github.com/expiryctl/expiryctl/replay"
)

// Consumers returns the reader of who consumes a replay's target queues,
// and which handler version each consumer's connection advertises, from
// RabbitMQ's management API at ManagementURLs (the reader LiveQueues
// returns). It dials nothing until asked; an API that cannot be reached is
// the error of each read, which `replay run` refuses on unless the request
// said --same-handler-ok.
func (f *Factory) Consumers() replay.Consumers {
	return f.management()
}
