package broker

import (
	"strings"
	"testing"
)

func TestBindingMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, pattern, key string
		want               bool
	}{
		{"direct", "reservation.expire", "reservation.expire", true},
		{"direct", "reservation.*", "reservation.expire", false},
		{"topic", "reservation.*", "reservation.expire", true},
		{"topic", "reservation.*", "reservation.expire.now", false},
		{"topic", "reservation.#", "reservation", true},
		{"topic", "reservation.#", "reservation.expire.now", true},
		{"topic", "#", "", true},
		{"topic", "#.now", "reservation.expire.now", true},
		{"topic", "*.expire.#", "reservation.expire", true},
		{"topic", "*", "", true}, // "" is one empty word
		{"topic", "*.*", "reservation", false},
		{"topic", "other.#", "reservation.expire", false},
		{"fanout", "anything", "reservation.expire", true},
		{"headers", "", "reservation.expire", true},
	} {
		if got := bindingMatches(tc.kind, tc.pattern, tc.key); got != tc.want {
			t.Errorf("%s binding %q, key %q: %v, want %v", tc.kind, tc.pattern, tc.key, got, tc.want)
		}
	}
}

func TestTopicMatchesLongKeysQuickly(t *testing.T) {
	t.Parallel()
	// A pattern of many #s must not take exponential time on a long key
	// that fails at its end: the routing key is a producer's.
	pattern := strings.Split(strings.Repeat("#.", 12)+"z", ".")
	key := strings.Split(strings.Repeat("a.", 30)+"b", ".")
	if topicMatches(pattern, key) {
		t.Fatal("matched")
	}
}
