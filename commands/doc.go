// Package commands is expiryctl's command-line adapter: cobra wiring, flags and
// environment, output formats and exit codes. It holds no domain logic; each
// command parses its options, calls the domain packages and formats what they
// return.
package commands
