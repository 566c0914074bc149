package deadletter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Classifier maps a letter to its reason category. It is immutable once
// built, so one Classifier may be shared by concurrent ingest workers.
//
// The rules apply in order, first match wins:
//
//  1. an undecodable payload is Malformed, whatever the headers say;
//  2. the error class, compared case-insensitively with "-", "_" and " "
//     equivalent;
//  3. the error patterns, tried on the last error text and then on the
//     error class itself (so that an unlisted "upstream_timeout" is still a
//     timeout);
//  4. a letter that names an application error none of the above knows is
//     Unknown: it did not die of the broker's doing, whatever x-death says,
//     and a worker's retry hops leave "expired" entries in x-death;
//  5. the reason of the most recent x-death entry (expired, maxlen,
//     delivery_limit, rejected);
//  6. otherwise Unknown.
type Classifier struct {
	classes  map[string]Category
	patterns []errorPattern
	reasons  map[string]Category
}

type errorPattern struct {
	re       *regexp.Regexp
	category Category
}

var defaultClassRules = map[Category][]string{
	TransientExhausted: {
		"db_timeout", "timeout", "connection_lost", "connection_refused", "connection_reset",
		"unavailable", "throttled", "rate_limited", "too_many_requests", "429", "deadlock",
		"lock_timeout", "lock_not_available", "serialization_failure", "transient", "broker_unavailable",
		// Node.js system error codes (err.code), which Node.js workers
		// often send as the class: the network failed, not the job.
		"etimedout", "esockettimedout", "econnrefused", "econnreset", "econnaborted",
		"ehostunreach", "eai_again", "epipe", "enotfound",
	},
	Validation: {"validation", "invalid", "bad_request", "schema"},
	NotFound:   {"not_found", "missing", "404"},
	Conflict:   {"version_conflict", "conflict", "stale_version", "409"},
	Malformed:  {"malformed", "decode", "unmarshal", "parse_error"},
}

// defaultPatterns is ordered. The conflict pattern comes first because it
// needs two words and an optimistic-locking failure mentions "lock"; then
// the transient causes, because a timeout message often names the row it was
// working on ("... not found after timeout" is still a timeout).
var defaultPatterns = []struct {
	match    string
	category Category
}{
	{`(?i)version.*(conflict|mismatch)|(conflict|mismatch).*version|optimistic.?lock`, Conflict},
	{`(?i)timeout|timed out|deadline exceeded`, TransientExhausted},
	// Node.js system error codes, as err.message carries them ("connect
	// ECONNREFUSED 10.0.0.1:5432", "getaddrinfo ENOTFOUND db"). Case
	// sensitive: Node.js writes them in capitals, and "epipe" in lowercase
	// prose is more likely a word than an error code.
	{`\bE(TIMEDOUT|SOCKETTIMEDOUT|CONNREFUSED|CONNRESET|CONNABORTED|HOSTUNREACH|AI_AGAIN|PIPE|NOTFOUND)\b`, TransientExhausted},
	{`(?i)connection (refused|reset|lost|closed)`, TransientExhausted},
	{`(?i)deadlock`, TransientExhausted},
	{`(?i)serializ`, TransientExhausted},
	// \b keeps "blocked" and "r-84291" from matching.
	{`(?i)\block`, TransientExhausted},
	{`(?i)\b429\b|too many requests|throttl|rate.?limit`, TransientExhausted},
	{`(?i)(service|temporarily) unavailable`, TransientExhausted},
	{`(?i)not found|no rows in result set`, NotFound},
	{`(?i)invalid|validation`, Validation},
}

var defaultReasons = map[string]Category{
	"expired":        BrokerExpired,
	"maxlen":         BrokerLimit,
	"delivery_limit": BrokerLimit,
	"rejected":       Unknown,
}

var defaultClassifier = sync.OnceValue(func() *Classifier {
	c := &Classifier{classes: map[string]Category{}, reasons: maps.Clone(defaultReasons)}
	for cat, classes := range defaultClassRules {
		for _, class := range classes {
			c.classes[normalizeClass(class)] = cat
		}
	}
	for _, p := range defaultPatterns {
		c.patterns = append(c.patterns, errorPattern{re: regexp.MustCompile(p.match), category: p.category})
	}
	return c
})

// DefaultClassifier returns the built-in rules of the design's "Reason
// categories". The result is shared; it must not be modified.
func DefaultClassifier() *Classifier {
	return defaultClassifier()
}

// classifierFile is the format LoadClassifier reads.
type classifierFile struct {
	ErrorClasses  map[string]string `json:"error_classes"`
	ErrorPatterns []struct {
		Match    string `json:"match"`
		Category string `json:"category"`
	} `json:"error_patterns"`
	DeathReasons map[string]string `json:"death_reasons"`
}

// LoadClassifier returns DefaultClassifier's rules overridden and extended by
// the JSON file at path:
//
//	{
//	  "error_classes":  {"payment_gateway_down": "transient-exhausted"},
//	  "error_patterns": [{"match": "(?i)lock wait", "category": "transient-exhausted"}],
//	  "death_reasons":  {"rejected": "transient-exhausted"}
//	}
//
// Every section is optional. A class in the file replaces a default of the
// same name (after the same normalisation Classify applies); the file's
// patterns, in Go regexp syntax, are tried before the defaults, in file
// order; death_reasons maps x-death reasons. Mapping something to "unknown"
// switches a default rule off. An unknown field, an unknown category or a
// pattern that does not compile is an error naming the file and the entry,
// because a typo silently falling back to a default would misfile letters
// during an incident.
func LoadClassifier(path string) (*Classifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read classifier file: %w", err)
	}
	var f classifierFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("classifier file %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("classifier file %s: unexpected data after the JSON object", path)
	}

	base := DefaultClassifier()
	c := &Classifier{classes: maps.Clone(base.classes), reasons: maps.Clone(base.reasons)}
	if err := mergeNames(c.classes, f.ErrorClasses, path, "error_classes"); err != nil {
		return nil, err
	}
	if err := mergeNames(c.reasons, f.DeathReasons, path, "death_reasons"); err != nil {
		return nil, err
	}
	for i, p := range f.ErrorPatterns {
		entry := fmt.Sprintf("error_patterns[%d] (match %q)", i, p.Match)
		if p.Match == "" {
			return nil, fmt.Errorf("classifier file %s: %s: match is empty; it would match every error", path, entry)
		}
		re, err := regexp.Compile(p.Match)
		if err != nil {
			return nil, fmt.Errorf("classifier file %s: %s: %w", path, entry, err)
		}
		cat, err := ParseCategory(p.Category)
		if err != nil {
			return nil, fmt.Errorf("classifier file %s: %s: %w", path, entry, err)
		}
		c.patterns = append(c.patterns, errorPattern{re: re, category: cat})
	}
	c.patterns = append(c.patterns, base.patterns...)
	return c, nil
}

// mergeNames copies a file's name→category section over the defaults, in
// sorted order so that the first error reported does not vary between runs.
func mergeNames(dst map[string]Category, src map[string]string, path, section string) error {
	fromFile := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(src)) {
		key := normalizeClass(name)
		if key == "" {
			return fmt.Errorf("classifier file %s: %s: empty name", path, section)
		}
		cat, err := ParseCategory(src[name])
		if err != nil {
			return fmt.Errorf("classifier file %s: %s[%q]: %w", path, section, name, err)
		}
		if other, dup := fromFile[key]; dup && dst[key] != cat {
			return fmt.Errorf("classifier file %s: %s: %q and %q name the same class but map to different categories", path, section, other, name)
		}
		fromFile[key] = name
		dst[key] = cat
	}
	return nil
}

// normalizeClass makes "DB-Timeout", "db timeout" and "db_timeout" one class.
func normalizeClass(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', ' ', '\t':
			return '_'
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
}

// Classify returns the reason category of l; payloadMalformed says whether
// its payload could be decoded (see PayloadMalformed). The result is always
// one of Categories(). A nil Classifier classifies with DefaultClassifier.
func (c *Classifier) Classify(l *Letter, payloadMalformed bool) Category {
	if c == nil {
		c = DefaultClassifier()
	}
	if payloadMalformed {
		return Malformed
	}
	if l == nil {
		return Unknown
	}
	if cat, ok := c.classes[normalizeClass(l.ErrorClass)]; ok && l.ErrorClass != "" {
		return cat
	}
	for _, text := range []string{l.LastError, l.ErrorClass} {
		if text == "" {
			continue
		}
		for _, p := range c.patterns {
			if p.re.MatchString(text) {
				return p.category
			}
		}
	}
	if l.ErrorClass != "" || l.LastError != "" {
		return Unknown
	}
	if len(l.Deaths) > 0 {
		if cat, ok := c.reasons[normalizeClass(l.Deaths[0].Reason)]; ok {
			return cat
		}
	}
	return Unknown
}
