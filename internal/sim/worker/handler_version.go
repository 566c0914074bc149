package worker

import amqp "github.com/rabbitmq/amqp091-go"

// HeaderHandlerVersion holds the version of the worker that dead-lettered
// a letter (Config.HandlerVersion), so that a replay can tell whether the
// worker consuming now is another one.
const HeaderHandlerVersion = "x-handler-version"

// HandlerVersionProperty is the AMQP connection property in which a
// consumer advertises its handler version.
const HandlerVersionProperty = "handler-version"

// DefaultHandlerVersion is the reference worker's version when none is
// configured.
const DefaultHandlerVersion = "reference-1"

// ConnectionProperties are the AMQP connection properties (amqp091's
// Config.Properties) of a worker of handler version: the version a replay
// reads back from the management API, and a connection name that says what
// the connection is.
func ConnectionProperties(version string) amqp.Table {
	if version == "" {
		version = DefaultHandlerVersion
	}
	return amqp.Table{
		HandlerVersionProperty: version,
		"connection_name":      "expiryctl-worker " + version,
		"product":              "expiryctl reference worker",
	}
}
