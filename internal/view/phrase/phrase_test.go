package phrase_test

import (
	"testing"

	"github.com/expiryctl/expiryctl/internal/view/phrase"
)

func TestCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 letters"}, {1, "1 letter"}, {2, "2 letters"}, {-1, "-1 letters"}} {
		if got := phrase.Count(c.n, "letter", "letters"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := phrase.Count(1, "entry", "entries"); got != "1 entry" {
		t.Errorf("int: %q", got)
	}
}
