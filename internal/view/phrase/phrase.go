// Package phrase writes the small pieces of English that the commands and
// the terminal UI put numbers in, so that both say "1 letter" and
// "2 letters" alike.
package phrase

import "strconv"

// Count is n with the noun that fits it: "1 letter", "0 letters",
// "3 letters". many is the plural.
func Count[N int | int64](n N, one, many string) string {
	noun := many
	if n == 1 {
		noun = one
	}
	return strconv.FormatInt(int64(n), 10) + " " + noun
}
