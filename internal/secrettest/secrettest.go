// Package secrettest holds what the redaction tests of dsn, store and broker
// share: the forms in which a reader would recognise a password, and where
// in a message they show outside the masks. It is written apart from dsn's
// own Secrets so that the tests do not trust what they check.
package secrettest

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Mask is what redaction writes in place of a password.
const Mask = "xxxxx"

// KeyValueEscape escapes pw for a quoted value of a key=value connection
// string.
func KeyValueEscape(pw string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
}

// Forms returns what a reader would recognise as pw: as typed,
// percent-decoded, percent-encoded the ways net/url writes it, escaped for a
// key=value string, and, when pw was typed raw into a URL, the runs before
// and after each "@", "/", "?" and "#" that a misreading parser prints as a
// host, port or path; each of those at least minLen bytes long, and also as
// Go's %q and %+q write it.
func Forms(pw string, raw bool, minLen int) []string {
	plain := []string{pw, KeyValueEscape(pw)}
	if dec, err := url.PathUnescape(pw); err == nil {
		plain = append(plain, dec)
	}
	for _, s := range plain {
		plain = append(plain, url.PathEscape(s), url.QueryEscape(s), strings.TrimPrefix(url.UserPassword("", s).String(), ":"))
	}
	for i := 0; raw && i < len(pw); i++ {
		if strings.IndexByte("@/?#", pw[i]) >= 0 {
			plain = append(plain, pw[:i], pw[i+1:])
		}
	}
	var out []string
	for _, s := range plain {
		if s != "" && len(s) >= minLen {
			q, a := strconv.Quote(s), strconv.QuoteToASCII(s)
			out = append(out, s, q[1:len(q)-1], a[1:len(a)-1])
		}
	}
	return out
}

// CountOutsideMasks counts the occurrences of form in text that no mask
// touches, nor the ":" that pgx writes before its own mask: a password
// "xxxx" is no leak.
func CountOutsideMasks(text, form string) int {
	n := 0
	for _, seg := range strings.Split(strings.ReplaceAll(text, ":"+Mask, Mask), Mask) {
		n += strings.Count(seg, form)
	}
	return n
}

// GoSyntax returns err as %#v prints it, without the pointer values, whose
// hex digits may spell a piece of any password.
func GoSyntax(err error) string {
	return pointer.ReplaceAllString(fmt.Sprintf("%#v", err), "0x…")
}

var pointer = regexp.MustCompile(`0x[0-9a-f]+`)
