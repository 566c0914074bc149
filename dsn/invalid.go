package dsn

// InvalidError is a connection URL that does not parse, or names a scheme
// its server does not speak. It is the user's argument that is wrong, not
// the server, so the commands exit with their usage code for it. It holds
// only redacted text: a value printed with %#v, or logged whole, must not
// carry the password either.
type InvalidError struct {
	// What names the URL's server, as in "database" or "AMQP".
	What string
	// URL is the URL as given, its password redacted.
	URL string
	// Reason is what the parser said, with the URL's secrets scrubbed.
	Reason string
	// Want is the shape of a right URL, with its scheme.
	Want string
}

// Invalid builds an InvalidError for rawURL, which err refused, redacting
// both before they are kept.
func Invalid(what, rawURL string, err error, want string) *InvalidError {
	return &InvalidError{What: what, URL: Redact(rawURL), Reason: RedactTextFor(err.Error(), rawURL), Want: want}
}

func (e *InvalidError) Error() string {
	return "invalid " + e.What + " URL " + e.URL + ": " + e.Reason + "; a URL looks like " + e.Want
}
