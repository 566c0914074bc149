package replay_test

import (
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// The pacer's tests read the real management API of the test broker.
func init() {
	replay.UseManagementFlow(func() replay.Flow {
		return broker.NewManagement(broker.ManagementConfig{AMQPURL: amqptest.URL()})
	})
}
