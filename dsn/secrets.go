package dsn

import (
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// minSecretLen is the shortest piece of a password that Secrets returns on
// its own. Scrubbing every "ab" or "pw" from a message would leave it
// unreadable while hiding nothing a reader could recognise; shorter pieces are
// returned only with the "@" or ":" that places them in a misread URL.
const minSecretLen = 4

// urlDelims are the bytes at which some parser ends a URL's password early:
// net/url and amqp091 at "/", "?" and "#", pgx at the first "@" and at "/",
// pgx's host list at "," and ":", a query at "&", and anything that handles
// a message line by line or word by word (store's own error tidying among
// them) at white space.
const urlDelims = "@/?#,:& \t\n\r"

// keyValueDelims are where pgx's own redaction of a key/value string that it
// cannot parse ends a password early, at an escaped quote or a space, and
// where line-by-line handling splits it.
const keyValueDelims = "' \t\n\r"

// maxPieceBounds is the most delimiters in a password that Secrets pairs up
// every way, so that a password made of delimiters cannot make it quadratic.
const maxPieceBounds = 8

// Secrets returns every recognisable form of the passwords in rawURL, longest
// first, for Scrub to remove from text that may quote them: the userinfo
// password and any password or sslpassword parameter of a URL, or the
// password of a key/value string. It returns nil when rawURL holds none.
//
// Each password is returned as typed, percent-decoded, percent-encoded the
// ways net/url writes it (userinfo, path and query escaping), and as Go's %q
// and %+q write each of those, since errors quote URLs that way; each piece
// below is returned as typed, percent-decoded and quoted the same way. For a
// malformed URL the password is everything from the scheme's "//user:" to the
// last "@" before the host. Because a parser that ends it sooner prints the
// rest as a host, port or path, every run of it between the characters where
// parsers split it ("@", "/", "?", "#", ",", ":", "&", white space) is returned
// too; a run shorter than four bytes only with the "@" that follows it as the
// last run (the host "ss@db.example" pgx reads from "pa@ss") or the ":"
// before it as the first run up to a "/", "?" or "#" (the port ":pa" net/url
// reads from "pa/ss"). A key/value password is split likewise at quotes and
// white space, where pgx's own redaction of a string it cannot parse stops.
//
// Forms shorter than four bytes are left out: scrubbing every "pw" from a
// message would make it unreadable and hide nothing a reader could tell from
// the rest. Redact and RedactText still mask a short password where a URL or
// key/value string holds it.
func Secrets(rawURL string) []string {
	p, ok := parse(rawURL)
	if !ok {
		return nil
	}
	set := map[string]bool{}
	add := func(s string, minLen int) {
		if len(s) >= minLen {
			set[s] = true
		}
	}
	for _, f := range p.fields {
		raw := rawURL[f.start:f.end]
		if !f.inURL {
			typed := strings.TrimSuffix(strings.TrimPrefix(raw, "'"), "'")
			add(typed, minSecretLen)
			for _, form := range forms(keyValueValue(raw)) {
				add(form, minSecretLen)
			}
			for _, pc := range pieces(typed, keyValueDelims) {
				if len(pc.text) >= minSecretLen {
					add(pc.text, 0)
					add(quoteInner(pc.text), 0)
					add(asciiQuoteInner(pc.text), 0)
				}
			}
			continue
		}
		decoded := percentDecode(raw)
		for _, v := range distinct(raw, decoded, strings.ReplaceAll(decoded, "+", " ")) {
			for _, form := range forms(v) {
				add(form, minSecretLen)
			}
		}
		for _, pc := range pieces(raw, urlDelims) {
			for _, v := range distinct(pc.text, percentDecode(pc.text)) {
				for _, q := range distinct(v, quoteInner(v), asciiQuoteInner(v)) {
					switch {
					case len(v) >= minSecretLen:
						add(q, 0)
					case pc.last:
						add(q+"@", 0)
					case pc.first && strings.IndexByte("/?#", pc.next) >= 0:
						add(":"+q, 0)
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// forms returns v as typed, trimmed of the spaces pgx ignores, escaped by
// net/url, and quoted by Go's %q and %+q.
func forms(v string) []string {
	plain := distinct(
		v,
		strings.Trim(v, " "),
		strings.TrimPrefix(url.UserPassword("", v).String(), ":"),
		url.PathEscape(v),
		url.QueryEscape(v),
	)
	out := plain
	for _, s := range plain {
		out = append(out, quoteInner(s), asciiQuoteInner(s))
	}
	return out
}

// distinct returns ss without repeats, in order.
func distinct(ss ...string) []string {
	out := ss[:0]
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// quoteInner returns s as %q writes it, without the quotes.
func quoteInner(s string) string {
	if plainASCII(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// asciiQuoteInner returns s as %+q writes it, without the quotes.
func asciiQuoteInner(s string) string {
	if plainASCII(s) {
		return s
	}
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}

// plainASCII reports whether Go's quoting leaves s as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// piece is a run of a password between two delimiters.
type piece struct {
	text string
	// first and last say whether the run begins or ends the password.
	first, last bool
	// next is the delimiter after the run, 0 when it is last.
	next byte
}

// pieces returns the runs of password that begin at its start or after one of
// delims and end at its end or before one, the whole excepted. A password
// with more than maxPieceBounds delimiters is cut only at the first and last
// of each delimiter, where parsers cut it, and yields its prefixes, suffixes
// and the runs between neighbouring cuts.
func pieces(password, delims string) []piece {
	var cuts []int
	for i := 0; i < len(password); i++ {
		if strings.IndexByte(delims, password[i]) >= 0 {
			cuts = append(cuts, i)
		}
	}
	all := len(cuts) <= maxPieceBounds
	if !all {
		cuts = cuts[:0]
		for _, d := range []byte(delims) {
			if i := strings.IndexByte(password, d); i >= 0 {
				cuts = append(cuts, i, strings.LastIndexByte(password, d))
			}
		}
		sort.Ints(cuts)
		cuts = slices.Compact(cuts)
	}
	starts, ends := []int{0}, []int{}
	for _, c := range cuts {
		ends = append(ends, c)
		starts = append(starts, c+1)
	}
	ends = append(ends, len(password))

	var out []piece
	emit := func(s, e int) {
		if s < e && (s > 0 || e < len(password)) {
			pc := piece{text: password[s:e], first: s == 0, last: e == len(password)}
			if !pc.last {
				pc.next = password[e]
			}
			out = append(out, pc)
		}
	}
	for i, s := range starts {
		if !all {
			emit(0, ends[i])
			emit(s, len(password))
			emit(s, ends[i])
			continue
		}
		for _, e := range ends {
			emit(s, e)
		}
	}
	return out
}

// Scrub returns text with every occurrence of each of secrets replaced by
// "xxxxx"; occurrences that overlap or touch are replaced as one. Empty
// secrets are ignored. A leading ":" or a trailing "@" of a secret of more
// than one byte is context, as in the short pieces Secrets returns: it must
// match, but it stays in the text. Pass Scrub what Secrets returns for the URL
// a message may quote.
func Scrub(text string, secrets ...string) string {
	return mask(text, secretFields(text, secrets))
}

func secretFields(text string, secrets []string) []field {
	var fields []field
	for _, s := range secrets {
		if s == "" {
			continue
		}
		var lead, trail int
		if len(s) > 1 && s[0] == ':' {
			lead = 1
		}
		if len(s) > 1+lead && s[len(s)-1] == '@' {
			trail = 1
		}
		for i := 0; ; {
			j := strings.Index(text[i:], s)
			if j < 0 {
				break
			}
			fields = append(fields, field{i + j + lead, i + j + len(s) - trail, false})
			i += j + 1
		}
	}
	return fields
}

// RedactTextFor is RedactText for a caller that knows which connection
// strings text may quote, such as the URL it just failed to open. Each of
// rawURLs that appears whole (or as Go's %q writes it) is redacted as Redact
// would, and every form of its passwords that Secrets finds is scrubbed,
// including the pieces a misreading driver prints as a host, port or path.
// Everything is found in the original text and masked at once, so no mask
// splits a password into pieces that no longer match.
func RedactTextFor(text string, rawURLs ...string) string {
	fields := textFields(text)
	for _, raw := range rawURLs {
		if raw == "" {
			continue
		}
		spellings := []string{raw}
		if q := quoteInner(raw); q != raw {
			spellings = append(spellings, q)
		}
		for _, quoted := range spellings {
			p, _ := parse(quoted)
			for i := 0; ; {
				j := strings.Index(text[i:], quoted)
				if j < 0 {
					break
				}
				for _, f := range p.fields {
					fields = append(fields, field{i + j + f.start, i + j + f.end, f.inURL})
				}
				i += j + 1
			}
		}
		fields = append(fields, secretFields(text, Secrets(raw))...)
	}
	return mask(text, fields)
}
