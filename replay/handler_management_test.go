package replay_test

import (
	"os"

	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/fixture/amqptest"
	"github.com/expiryctl/expiryctl/replay"
)

// The handler check's tests read the real management API through the
// RabbitMQ adapter, which imports replay; see export_handler_test.go.
func init() {
	replay.UseManagement(func(managementURL string) replay.Consumers {
		if managementURL == "" {
			managementURL = os.Getenv("EXPIRYCTL_TEST_MANAGEMENT_URL")
		}
		return broker.NewManagement(broker.ManagementConfig{URL: managementURL, AMQPURL: amqptest.URL()})
	})
}
