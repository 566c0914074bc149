package commands

import (
	"io"

	"github.com/charmbracelet/x/ansi"
)

// progressLine is one line of progress on a terminal, rewritten in place at
// each update: a carriage return, an erase of the line, then the line cut
// to the terminal's width. A line wider than the terminal would wrap, and
// the carriage return would go back to the start of its last row only,
// leaving a row behind at every update.
type progressLine struct {
	w io.Writer
	// size tells the terminal's width (see terminalSize), read at each
	// update so that a resized terminal is followed.
	size func(io.Writer) (width, height int, ok bool)
}

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, size: terminalSize}
}

// show replaces the line with line.
func (p *progressLine) show(line string) {
	if width, _, ok := p.size(p.w); ok {
		line = fitLine(line, width)
	}
	_, _ = io.WriteString(p.w, "\r\x1b[K"+line)
}

// clear erases the line, leaving the cursor at its start for what follows.
func (p *progressLine) clear() { _, _ = io.WriteString(p.w, "\r\x1b[K") }

// fitLine cuts line to width-1 cells, ending it with an ellipsis: the last
// column stays free, since some terminals wrap as soon as it is written.
func fitLine(line string, width int) string {
	if width < 2 {
		return line
	}
	return ansi.Truncate(line, width-1, "…")
}
