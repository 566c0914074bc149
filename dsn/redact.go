package dsn

import (
	"net/url"
	"regexp"
	"strings"
)

// redactedPassword replaces a password wherever one would be shown.
const redactedPassword = "xxxxx"

// Redact returns rawURL with its password replaced by "xxxxx". Key-value
// connection strings ("host=… password=…") are redacted too. Text that does not
// parse as a URL is returned with anything that looks like credentials removed,
// so Redact is safe to call on whatever a user typed.
func Redact(rawURL string) string {
	if strings.Contains(rawURL, "password=") && !strings.Contains(rawURL, "://") {
		return keyValuePassword.ReplaceAllString(rawURL, "password="+redactedPassword)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return RedactText(rawURL)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedPassword)
		}
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", redactedPassword)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

var (
	userinfoInURL    = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\s]*):[^@/\s]*@`)
	keyValuePassword = regexp.MustCompile(`password=('[^']*'|\S*)`)
)

// RedactText removes passwords from every URL or key-value connection string
// quoted inside text, such as a driver's error message.
func RedactText(text string) string {
	text = userinfoInURL.ReplaceAllString(text, "${1}:"+redactedPassword+"@")
	return keyValuePassword.ReplaceAllString(text, "password="+redactedPassword)
}

// Address returns the host:port part of rawURL, for messages that say which
// server could not be reached. It never includes credentials.
func Address(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return RedactText(rawURL)
	}
	return u.Host
}
