package frame

import (
	"strings"
	"testing"
	"time"
)

func TestPadAndFit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		width int
		want  string
	}{
		{"abc", 5, "abc  "},
		{"abcdef", 4, "abc…"},
		{"東京タワー", 5, "東京…"},
		{"", 2, "  "},
		{"abc", 0, ""},
	}
	for _, tt := range tests {
		if got := Pad(tt.in, tt.width); got != tt.want {
			t.Errorf("Pad(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
		}
	}
	got := Fit("a\nbb\nccc\ndddd", 3, 3)
	if want := "a  \nbb \nccc"; got != want {
		t.Errorf("Fit = %q, want %q", got, want)
	}
	if got := Fit("a", 2, 3); got != "a \n  \n  " {
		t.Errorf("Fit pads to %q", got)
	}
}

func TestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{0, "0s"}, {45 * time.Second, "45s"}, {12 * time.Minute, "12m"}, {3*time.Hour + 5*time.Minute, "3h05m"},
		{47 * time.Hour, "47h00m"}, {4 * 24 * time.Hour, "4d"}, {-time.Hour, "11-30 13:00"},
	}
	for _, tt := range tests {
		if got := Age(now, now.Add(-tt.ago)); got != tt.want {
			t.Errorf("Age(%s ago) = %q, want %q", tt.ago, got, tt.want)
		}
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	tests := []struct{ top, cursor, height, n, want int }{
		{0, 0, 10, 100, 0}, {0, 9, 10, 100, 0}, {0, 10, 10, 100, 1}, {50, 20, 10, 100, 20},
		{95, 99, 10, 100, 90}, {0, 3, 10, 5, 0}, {0, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		if got := Window(tt.top, tt.cursor, tt.height, tt.n); got != tt.want {
			t.Errorf("Window(%d, %d, %d, %d) = %d, want %d", tt.top, tt.cursor, tt.height, tt.n, got, tt.want)
		}
	}
}

func TestTableWidths(t *testing.T) {
	t.Parallel()
	tab := Table{Theme: NewTheme(AsciiRenderer()), Columns: []Column{
		{Title: "ID", Width: 4}, {Title: "CATEGORY", Width: 6, Max: 8, Flex: true}, {Title: "QUEUE", Width: 5, Flex: true},
	}}
	for _, w := range []int{20, 40, 80, 120} {
		ws := tab.Widths(w)
		total := 2
		for _, x := range ws {
			total += x + 1
		}
		if total-1 != w && w >= 20 {
			t.Errorf("width %d: columns %v add up to %d", w, ws, total-1)
		}
		if ws[1] > 8 {
			t.Errorf("width %d: CATEGORY grew to %d past its max", w, ws[1])
		}
		if h := tab.Header(w); len([]rune(h)) != w || !strings.HasPrefix(h, "  ID") {
			t.Errorf("header %q", h)
		}
		if r := tab.Row(w, []string{"1", "transient-exhausted", "q"}, true, true); !strings.HasPrefix(r, ">*1") || len([]rune(r)) != w {
			t.Errorf("row %q", r)
		}
	}
}
