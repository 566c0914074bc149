// Package commands is expiryctl's command-line adapter: cobra wiring, flags and
// environment, output formats and exit codes. It holds no domain logic.
//
// Each command has an options struct whose first fields are its services, as
// lazy constructors (`Archive func(context.Context) (service.Archive,
// error)`), followed by its flag values. NewCmdX fills the constructors from
// the Factory, whose methods (services.go) connect on first use and build
// the same services the terminal UI gets; xRun resolves them, calls them and
// formats what they return. A test replaces the constructors with the fakes
// of internal/fixture/fakes, or keeps the Factory's over a test database.
package commands
