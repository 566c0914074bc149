// Package broker is expiryctl's RabbitMQ adapter: dialling with errors that
// name the server and never its password, the dead-letter queue consumer
// that deadletter's ingest reads (DLQSource, a deadletter.Source), and the
// confirm-mode publisher that replay's runner publishes with (AMQPBroker, a
// replay.Broker, which encodes each replayed copy as RabbitMQ takes it:
// replay_encode.go). The domain packages own those interfaces and do not
// import this package; it imports them.
package broker
