// Package broker is expiryctl's RabbitMQ adapter: dialling with errors that
// name the server and never its password, and the small helpers the domain
// packages share for consuming and publishing with confirms.
package broker
