package replay

// newManagementFlow opens the RabbitMQ adapter's reader of the management
// API (internal/adapter/broker's Management), which these in-package tests
// cannot import for the reason export_test.go gives; management_flow_test.go,
// in package replay_test, sets it at init.
var newManagementFlow func() Flow

// UseManagementFlow sets how replay's in-package tests read the management API.
func UseManagementFlow(open func() Flow) { newManagementFlow = open }
