// Package linewrap wraps text for a terminal at spaces only. charmbracelet's
// ansi.Wrap and ansi.Wordwrap also break at a hyphen, and a terminal left to
// wrap a long line breaks it at any column: either cuts the names an
// operator reads and copies — a category (transient-/exhausted, exhaust/ed),
// a queue (reservation-/expiry.dlq), a flag (--/outcome-url) — into two
// lines that no longer read or paste as one.
package linewrap

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Words wraps each line of s that is wider than width columns at its
// spaces. A word wider than a line on its own, and only such a word, is cut
// where the line ends. Widths count display columns and skip ANSI escape
// sequences, so styled text wraps as it shows. A width of less than one
// leaves s as it is.
func Words(s string, width int) string {
	if width < 1 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) > width {
			lines[i] = wrapLine(l, width)
		}
	}
	return strings.Join(lines, "\n")
}

// Hanging is Words for a labelled line, "  label   value": the lines after
// the first start at column indent, under the value, so that nothing comes
// under the label. A line narrower than width, or a width that leaves the
// value fewer than 20 columns, is left as it is.
func Hanging(s string, width, indent int) string {
	if width < indent+20 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		w := ansi.StringWidth(l)
		if w <= width {
			continue
		}
		value := wrapLine(ansi.Cut(l, indent, w), width-indent)
		lines[i] = ansi.Cut(l, 0, indent) + strings.ReplaceAll(value, "\n", "\n"+strings.Repeat(" ", indent))
	}
	return strings.Join(lines, "\n")
}

func wrapLine(l string, width int) string {
	var out []string
	cur, started := "", false
	for _, w := range strings.Split(l, " ") {
		if started {
			if next := cur + " " + w; ansi.StringWidth(next) <= width {
				cur = next
				continue
			}
			out = append(out, strings.TrimRight(cur, " "))
		}
		for ansi.StringWidth(w) > width {
			out = append(out, ansi.Cut(w, 0, width))
			w = ansi.Cut(w, width, ansi.StringWidth(w))
		}
		cur, started = w, true
	}
	return strings.Join(append(out, strings.TrimRight(cur, " ")), "\n")
}
