package linewrap

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func TestWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		width int
		want  string
	}{
		{"fits", "transient-exhausted", 30, "transient-exhausted"},
		{"never at a hyphen", "the letter is transient-exhausted after five attempts", 24,
			"the letter is\ntransient-exhausted\nafter five attempts"},
		{"a flag stays whole", "then run with --outcome-url", 20, "then run with\n--outcome-url"},
		{"a word wider than a line is cut", "id 0123456789abcdef0123 ok", 10, "id\n0123456789\nabcdef0123\nok"},
		{"leading spaces kept", "    key: a value that wraps", 16, "    key: a value\nthat wraps"},
		{"each line on its own", "short\nanother line that wraps", 12, "short\nanother line\nthat wraps"},
		{"styled text measured as shown", "\x1b[1mbold\x1b[0m words here", 10, "\x1b[1mbold\x1b[0m words\nhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Words(tt.in, tt.width)
			if got != tt.want {
				t.Errorf("Words(%q, %d) =\n%s\nwant\n%s", tt.in, tt.width, got, tt.want)
			}
			for _, l := range strings.Split(got, "\n") {
				if ansi.StringWidth(l) > tt.width {
					t.Errorf("line %q is wider than %d", l, tt.width)
				}
			}
		})
	}
}

func TestHanging(t *testing.T) {
	t.Parallel()
	in := "  category          transient-exhausted, after five attempts of the expiry worker"
	got := Hanging(in, 50, 20)
	want := "  category          transient-exhausted, after\n" +
		"                    five attempts of the expiry\n" +
		"                    worker"
	if got != want {
		t.Errorf("Hanging =\n%s\nwant\n%s", got, want)
	}
}
