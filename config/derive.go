package config

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// unnamed are the characters a derived name cannot hold.
var unnamed = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// DeriveName names the connection to a server that a URL typed on the
// command line reaches and that the configuration does not name:
// SYSTEM-AUTHORITY-DATABASE, with each run of characters a name cannot
// hold (the ':' before a port, an IPv6 address's brackets) made one '-',
// and then, because two servers could read alike, the first eight hex
// digits of the SHA-256 of what was cleaned, after one more '-'. A name
// longer than 63 is cut to make room for them. authority is HOST:PORT as
// net.JoinHostPort writes it, database as the URL's path escapes it (a
// database number for Redis).
//
// The upgrade that gave letters connection names (migration 00041) names
// the servers of letters captured before it by the same rule, in SQL:
// store/migrations/00041_letters_name_connections.sql, which a test holds
// to this function.
func DeriveName(system, authority, database string) string {
	base := system + "-" + authority + "-" + database
	clean := unnamed.ReplaceAllString(base, "-")
	if clean == base && len(clean) <= 63 {
		return clean
	}
	sum := sha256.Sum256([]byte(base))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(clean) > 63-len(suffix) {
		clean = clean[:63-len(suffix)]
	}
	return clean + suffix
}
