package replay

// newManagement opens the RabbitMQ adapter's reader of the management API
// (internal/adapter/broker's Management) on the test broker, or on the API
// at managementURL when it is set. That package imports this one, so
// handler_management_test.go, in package replay_test, sets it at init.
var newManagement func(managementURL string) Consumers

// UseManagement sets how replay's in-package tests read the management API.
func UseManagement(open func(managementURL string) Consumers) { newManagement = open }
