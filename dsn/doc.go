// Package dsn keeps connection strings out of sight: it redacts the password
// of a PostgreSQL or AMQP URL (and of any text that quotes one) before the
// URL reaches output, logs or an error message.
package dsn
