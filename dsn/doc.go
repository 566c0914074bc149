// Package dsn keeps connection strings out of sight: it redacts the password
// of a PostgreSQL or AMQP URL or key/value string (and of any text that quotes
// one) before it reaches output, logs, an error message or an audit row.
//
// Redaction works in two layers. Redact and RedactText parse: they find a
// password where a URL or "password=" puts it and mask it in place. That
// cannot be enough for a driver's error, which may quote only a piece of a
// URL it misread (pgx takes the first raw "@" of a password as the end of the
// userinfo and names the rest of the password as the host). So a caller that
// knows the URL also scrubs its secrets: Secrets lists every form a password
// can take in such a message, Scrub removes them, and RedactTextFor does
// both for a message and the URLs it may quote.
package dsn
