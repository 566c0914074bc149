package frame

import (
	"slices"
	"strings"
)

// Column is one column of a Table. Width is its minimum width in cells;
// Flex columns share what is left of the line, one cell each in turn, up to
// Max (0: no limit): first those with the lowest Grow, then the next. What
// is still left goes to the last Flex column. Short replaces Title when the
// column is too narrow for it.
type Column struct {
	Title, Short string
	Width, Max   int
	Flex         bool
	Grow         int
}

// Table lays out rows of already-escaped cells in fixed columns. The first
// two cells of every line are a selection marker (">") and a mark ("*"), so
// that the cursor and marks stay visible without colour.
type Table struct {
	Columns []Column
	Theme   *Theme
}

// Widths returns the column widths for a line of width cells.
func (t Table) Widths(width int) []int {
	ws := make([]int, len(t.Columns))
	spare := width - 1 // marker and mark, and no separator after the last column
	for i, c := range t.Columns {
		ws[i] = c.Width
		spare -= c.Width + 1
	}
	grows := map[int]bool{}
	lastFlex := -1
	for i, c := range t.Columns {
		if c.Flex {
			grows[c.Grow] = true
			lastFlex = i
		}
	}
	levels := make([]int, 0, len(grows))
	for g := range grows {
		levels = append(levels, g)
	}
	slices.Sort(levels)
	for _, g := range levels {
		for spare > 0 {
			grew := false
			for i, c := range t.Columns {
				if spare > 0 && c.Flex && c.Grow == g && (c.Max == 0 || ws[i] < c.Max) {
					ws[i]++
					spare--
					grew = true
				}
			}
			if !grew {
				break
			}
		}
	}
	if spare > 0 && lastFlex >= 0 {
		ws[lastFlex] += spare
	}
	return ws
}

// Header renders the header line for width cells.
func (t Table) Header(width int) string {
	ws := t.Widths(width)
	var b strings.Builder
	b.WriteString("  ")
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteByte(' ')
		}
		title := c.Title
		if len(title) > ws[i] && c.Short != "" {
			title = c.Short
		}
		b.WriteString(Pad(title, ws[i]))
	}
	return t.Theme.Header.Render(Pad(b.String(), width))
}

// Row renders one line: cells cut to their columns, the ">" marker when
// selected (and the selected style), "*" when marked.
func (t Table) Row(width int, cells []string, selected, marked bool) string {
	ws := t.Widths(width)
	var b strings.Builder
	if selected {
		b.WriteByte('>')
	} else {
		b.WriteByte(' ')
	}
	if marked {
		b.WriteByte('*')
	} else {
		b.WriteByte(' ')
	}
	for i := range t.Columns {
		if i > 0 {
			b.WriteByte(' ')
		}
		cell := ""
		if i < len(cells) {
			cell = cells[i]
		}
		b.WriteString(Pad(cell, ws[i]))
	}
	line := Pad(b.String(), width)
	if selected {
		return t.Theme.Selected.Render(line)
	}
	return line
}

// Window returns the first visible index for a list of n rows shown height
// at a time with the cursor at cursor, keeping the cursor in view and moving
// the window as little as possible from top.
func Window(top, cursor, height, n int) int {
	if height <= 0 || n <= 0 {
		return 0
	}
	if cursor < top {
		top = cursor
	}
	if cursor >= top+height {
		top = cursor - height + 1
	}
	if top > n-height {
		top = max(0, n-height)
	}
	return max(0, top)
}
