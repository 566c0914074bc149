package dsn

import "strings"

// redactedPassword replaces a password wherever one would be shown.
const redactedPassword = "xxxxx"

// Redact returns rawURL with its password replaced by "xxxxx" and everything
// else as typed. It reads PostgreSQL and AMQP URLs (postgres://, postgresql://,
// amqp://, amqps://, multi-host, without a scheme) and libpq key/value strings
// ("host=… password='…'"), and masks the userinfo password, any password or
// sslpassword parameter, and a port that is not a number (what a password
// becomes when its URL has no "@").
//
// A password holding a raw "@", "/", "?", "#" or space is read the way that
// hides the most: the userinfo runs to the last "@", as the user meant,
// rather than to the first "/" or "@" where net/url and pgx would end it. The
// price is that in a URL with a raw "@" in its path or query everything from
// the first ":" after the "//" to that "@" is masked too; percent-encoding it
// as %40 keeps the rest visible. Text that is neither a URL nor a key/value
// string goes through RedactText, so Redact is safe to call on whatever a
// user typed.
func Redact(rawURL string) string {
	p, ok := parse(rawURL)
	if !ok {
		return RedactText(rawURL)
	}
	return mask(rawURL, p.fields)
}

// RedactText removes passwords from every URL or key/value connection string
// quoted inside text, such as a driver's error message. A URL is found by its
// "scheme://" and read as Redact reads it, up to its closing quote when it is
// quoted, else up to the next space (or, when no "@" comes before that space
// and its port is not a number, up to the next "@" on the line, since that is
// a password with a space). A value is masked after any keyword ending in
// "password" (password, sslpassword, PGPASSWORD) followed by "=".
//
// RedactText can only see a password where it still stands in a URL or after
// "password=". A message that quotes a piece of one, such as a host that pgx
// misread from a password with a raw "@", needs RedactTextFor, which knows
// the URL.
func RedactText(text string) string {
	return mask(text, textFields(text))
}

// textFields finds the passwords RedactText masks.
func textFields(text string) []field {
	var fields []field
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], "://")
		if j < 0 {
			break
		}
		j += i
		start := j
		for start > i && (isLetter(text[start-1]) || isDigit(text[start-1]) || strings.IndexByte("+-.", text[start-1]) >= 0) {
			start--
		}
		for start < j && !isLetter(text[start]) {
			start++
		}
		if start == j {
			i = j + 3
			continue
		}
		end := urlEnd(text, start, j+3)
		fields = append(fields, parseURL(text[:end], j+3).fields...)
		i = end
	}
	return append(fields, keywordFields(text)...)
}

// urlEnd returns where the URL that begins at start in text, with its
// authority at a, ends.
func urlEnd(text string, start, a int) int {
	if start > 0 && strings.IndexByte("\"'`", text[start-1]) >= 0 {
		if end := closingQuote(text, a, text[start-1]); end >= 0 {
			return end
		}
	}
	end := a + indexAnyOrLen(text[a:], asciiSpace)
	// "postgres://u:S3cret PW@host": to a reader the URL ends at the space, but
	// a URL with no "@" whose port is not a number is a password that holds a
	// space, so it runs on to the next "@" on the line.
	if strings.Contains(text[a:end], "@") {
		return end
	}
	var p parsed
	p.ports(text, a, a+indexAnyOrLen(text[a:end], "/?#"))
	if len(p.fields) == 0 {
		return end
	}
	line := text[end:]
	if nl := strings.IndexByte(line, '\n'); nl >= 0 {
		line = line[:nl]
	}
	if at := strings.IndexByte(line, '@'); at >= 0 && !strings.Contains(line[:at], "://") {
		e := end + at + 1
		end = e + indexAnyOrLen(text[e:], asciiSpace)
	}
	return end
}

// closingQuote returns the index of the quote q that closes a quoted string
// whose text begins at i (a backslash escapes the next byte inside double
// quotes, as Go's %q writes them), or -1 when the line ends first.
func closingQuote(text string, i int, q byte) int {
	for ; i < len(text); i++ {
		switch text[i] {
		case q:
			return i
		case '\n':
			return -1
		case '\\':
			if q == '"' {
				i++
			}
		}
	}
	return -1
}

// keywordFields finds the values after "password=" (or any keyword ending in
// "password") in text. Inside a URL query ("?password=", "&password=") a
// value ends at the next "&".
func keywordFields(text string) []field {
	var fields []field
	for i := 0; i < len(text); i++ {
		if text[i] != '=' {
			continue
		}
		k := i
		for k > 0 && (text[k-1] == ' ' || text[k-1] == '\t') {
			k--
		}
		key := lastWord(text[:k])
		if !strings.HasSuffix(strings.ToLower(key), "password") {
			continue
		}
		start, end := valueSpan(text, i+1)
		if before := k - len(key) - 1; before >= 0 && (text[before] == '?' || text[before] == '&') {
			end = start + indexAnyOrLen(text[start:end], "&")
		}
		// pgx's own "password=xxxxx`:" is already masked; masking it again
		// would swallow the punctuation after it.
		if v := text[start:end]; strings.HasPrefix(v, redactedPassword) &&
			strings.Trim(v[len(redactedPassword):], "`'\")]}:;,.") == "" {
			continue
		}
		if start < end {
			fields = append(fields, field{start, end, false})
		}
		i = max(i, end-1)
	}
	return fields
}

// Address returns the host list of rawURL ("host:port", or several joined by
// commas), for messages that say which server could not be reached. It never
// includes credentials: a port that is not a number is masked, and so is any
// piece of the password that a misplaced "@" pushed into the host. A string
// with no host, such as a key/value string, is returned redacted whole.
func Address(rawURL string) string {
	p, ok := parse(rawURL)
	if !ok || p.hostStart == p.hostEnd {
		return Scrub(Redact(rawURL), Secrets(rawURL)...)
	}
	var inHost []field
	for _, f := range p.fields {
		if p.hostStart <= f.start && f.end <= p.hostEnd {
			inHost = append(inHost, field{f.start - p.hostStart, f.end - p.hostStart, f.inURL})
		}
	}
	return Scrub(mask(rawURL[p.hostStart:p.hostEnd], inHost), Secrets(rawURL)...)
}

// HasPassword reports whether rawURL, a URL or key/value connection string,
// carries a password (in its userinfo, a password or sslpassword
// parameter, or a key/value password), read the way Redact reads it.
func HasPassword(rawURL string) bool {
	p, ok := parse(rawURL)
	return ok && len(p.fields) > 0
}
