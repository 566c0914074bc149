package dsn

import (
	"sort"
	"strings"
)

// field is a password found in a connection string: the bytes [start, end)
// as typed (a key/value value with its quotes, a URL component still
// percent-encoded).
type field struct {
	start, end int
	inURL      bool
}

// parsed is where a connection string keeps its passwords and its hosts.
type parsed struct {
	fields []field
	// hostStart and hostEnd bound the host list of a URL (the authority after
	// any userinfo); they are equal for a key/value string.
	hostStart, hostEnd int
}

func (p *parsed) add(start, end int, inURL bool) {
	if start < end {
		p.fields = append(p.fields, field{start, end, inURL})
	}
}

// parse finds the passwords in s, a URL (with or without a scheme) or a
// key/value connection string. It never fails: a malformed string is read the
// way that hides the most, because a parser that disagrees with another about
// where a password ends is exactly what prints the rest of it. ok is false
// when s is neither a URL nor a key/value string.
func parse(s string) (p parsed, ok bool) {
	start := len(s) - len(strings.TrimLeft(s, asciiSpace))
	t := s[start:]
	switch {
	case schemeLen(t) > 0:
		return parseURL(s, start+schemeLen(t)), true
	case strings.HasPrefix(t, "//"):
		return parseURL(s, start+2), true
	case looksKeyValue(t):
		return parseKeyValue(s, start), true
	case strings.Contains(t, "@"):
		// "user:password@host/db", a URL whose scheme was left off.
		return parseURL(s, start), true
	}
	return parsed{}, false
}

const asciiSpace = " \t\n\v\f\r"

// schemeLen returns the length of the "scheme://" that begins s, or 0.
func schemeLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isLetter(c):
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		case i > 0 && strings.HasPrefix(s[i:], "://"):
			return i + 3
		default:
			return 0
		}
	}
	return 0
}

// looksKeyValue reports whether s begins "keyword=", as a libpq key/value
// connection string does.
func looksKeyValue(s string) bool {
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		return false
	}
	key := strings.TrimRight(s[:eq], asciiSpace)
	return key != "" && strings.IndexFunc(key, func(r rune) bool { return r > 0x7f || !isKeywordChar(byte(r)) }) < 0
}

// parseURL reads the URL s whose authority begins at a (just after "//", or at
// the start of a URL without a scheme).
//
// net/url and amqp091 end the authority at the first "/", "?" or "#" and the
// userinfo at the last "@" before that; pgx ends the userinfo at the first
// "@" before any "/". A password holding one of those characters is read
// differently by each, so when an "@" follows the authority the text up to
// that last "@" is taken as userinfo too, and the passwords of both readings
// are masked. The host is the second reading's, the one the user meant,
// unless that "@" sits in a password query value or no password precedes it.
func parseURL(s string, a int) parsed {
	var p parsed
	rest := s[a:]
	authEnd := indexAnyOrLen(rest, "/?#")
	at := strings.LastIndexByte(rest[:authEnd], '@')
	p.hostStart, p.hostEnd = p.readURL(s, a, at)

	if last := strings.LastIndexByte(rest, '@'); last > authEnd {
		inValue := p.covers(a + last)
		hostStart, hostEnd := p.readURL(s, a, last)
		if !inValue && strings.Contains(rest[:last], ":") {
			p.hostStart, p.hostEnd = hostStart, hostEnd
		}
	}
	return p
}

// covers reports whether byte i lies inside a password found so far.
func (p *parsed) covers(i int) bool {
	for _, f := range p.fields {
		if f.start <= i && i < f.end {
			return true
		}
	}
	return false
}

// readURL records the passwords of the URL whose authority begins at a,
// reading its userinfo as ending at the "@" at a+at (none when at < 0), and
// returns where its host list begins and ends.
func (p *parsed) readURL(s string, a, at int) (hostStart, hostEnd int) {
	rest := s[a:]
	h := 0
	if at >= 0 {
		if c := strings.IndexByte(rest[:at], ':'); c >= 0 {
			p.add(a+c+1, a+at, true)
		}
		h = at + 1
	}
	e := h + indexAnyOrLen(rest[h:], "/?#")
	p.ports(s, a+h, a+e)
	if q := strings.IndexByte(rest[e:], '?'); q >= 0 {
		p.query(s, a+e+q+1)
	}
	return a + h, a + e
}

// ports records as a password every port in the host list s[start:end] that
// is not a number: with no "@" to end it, "postgres://user:secret" reads as
// host "user" and port "secret".
func (p *parsed) ports(s string, start, end int) {
	for i := start; i < end; {
		next := i + indexAnyOrLen(s[i:end], ",")
		host := s[i:next]
		if strings.HasPrefix(host, "[") {
			if b := strings.IndexByte(host, ']'); b >= 0 {
				host = host[b+1:]
			}
		}
		if c := strings.IndexByte(host, ':'); c >= 0 {
			port := host[c+1:]
			if strings.IndexFunc(port, func(r rune) bool { return r > 0x7f || !isDigit(byte(r)) }) >= 0 {
				p.add(next-len(port), next, true)
			}
		}
		i = next + 1
	}
}

// query records the password and sslpassword values of the URL query that
// begins at start. A value runs to the next "&" that starts another key=value
// pair, since pgx accepts "@", "#" and spaces inside it.
func (p *parsed) query(s string, start int) {
	pairs := splitSpans(s, start, len(s), '&')
	for i := 0; i < len(pairs); i++ {
		pair := s[pairs[i][0]:pairs[i][1]]
		eq := strings.IndexByte(pair, '=')
		if eq < 0 || !isPasswordKey(percentDecode(strings.Trim(pair[:eq], " "))) {
			continue
		}
		start, end := pairs[i][0]+eq+1, pairs[i][1]
		for i+1 < len(pairs) && !strings.Contains(s[pairs[i+1][0]:pairs[i+1][1]], "=") {
			i++
			end = pairs[i][1]
		}
		p.add(start, end, true)
	}
}

// parseKeyValue reads the key/value connection string s from start, by
// libpq's rules: keyword, optional spaces, "=", optional spaces, then a value
// that is either bare (up to a space, backslash escaping the next byte) or
// single-quoted (backslash escaping the next byte). An unterminated quote runs
// to the end. A keyword with junk before it is still read, so that
// "oops password=secret" hides the password although libpq rejects it.
func parseKeyValue(s string, start int) parsed {
	p := parsed{hostStart: start, hostEnd: start}
	for i := start; i < len(s); {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			break
		}
		key := lastWord(s[i : i+eq])
		vStart, vEnd := valueSpan(s, i+eq+1)
		if isPasswordKey(key) {
			p.add(vStart, vEnd, false)
		}
		i = vEnd
	}
	return p
}

// valueSpan returns where the key/value value that follows "=" at i begins and
// ends, quotes included.
func valueSpan(s string, i int) (start, end int) {
	for i < len(s) && strings.IndexByte(asciiSpace, s[i]) >= 0 {
		i++
	}
	start = i
	if i < len(s) && s[i] == '\'' {
		for i++; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return start, i + 1
			}
		}
		return start, len(s)
	}
	for ; i < len(s) && strings.IndexByte(asciiSpace, s[i]) < 0; i++ {
		if s[i] == '\\' {
			i++
		}
	}
	return start, min(i, len(s))
}

// keyValueValue returns the value of a key/value field as libpq reads it:
// quotes removed and backslash escapes resolved.
func keyValueValue(raw string) string {
	if strings.HasPrefix(raw, "'") {
		raw = strings.TrimSuffix(raw[1:], "'")
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) {
			i++
		}
		b.WriteByte(raw[i])
	}
	return b.String()
}

func lastWord(s string) string {
	s = strings.TrimRight(s, asciiSpace)
	i := len(s)
	for i > 0 && isKeywordChar(s[i-1]) {
		i--
	}
	return s[i:]
}

func isPasswordKey(key string) bool {
	return strings.EqualFold(key, "password") || strings.EqualFold(key, "sslpassword")
}

// percentDecode decodes every well-formed %XX in s and keeps the rest as it
// is: a password must be recognised however badly it was encoded.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mask returns s with the bytes of every field replaced by one "xxxxx";
// fields that overlap or touch are masked as one.
func mask(s string, fields []field) string {
	if len(fields) == 0 {
		return s
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].start < fields[j].start })
	var b strings.Builder
	done := 0
	for i := 0; i < len(fields); {
		start, end := fields[i].start, fields[i].end
		for i++; i < len(fields) && fields[i].start <= end; i++ {
			end = max(end, fields[i].end)
		}
		b.WriteString(s[done:start])
		b.WriteString(redactedPassword)
		done = end
	}
	b.WriteString(s[done:])
	return b.String()
}

// splitSpans returns the [start, end) bounds of the pieces of s[start:end]
// separated by sep.
func splitSpans(s string, start, end int, sep byte) [][2]int {
	var out [][2]int
	for {
		i := strings.IndexByte(s[start:end], sep)
		if i < 0 {
			return append(out, [2]int{start, end})
		}
		out = append(out, [2]int{start, start + i})
		start += i + 1
	}
}

func indexAnyOrLen(s, chars string) int {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return i
	}
	return len(s)
}

func isLetter(c byte) bool      { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool       { return '0' <= c && c <= '9' }
func isKeywordChar(c byte) bool { return isLetter(c) || isDigit(c) || c == '_' }
func isHex(c byte) bool         { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
