package commands

import (
	"io"
	"sync"

	"github.com/charmbracelet/x/ansi"
)

// progressLine is one line of progress on a terminal, rewritten in place at
// each update: a carriage return, an erase of the line, then the line cut
// to the terminal's width. A line wider than the terminal would wrap, and
// the carriage return would go back to the start of its last row only,
// leaving a row behind at every update.
//
// Other goroutines' messages go through say, so that they never run into
// the line.
type progressLine struct {
	w io.Writer
	// size tells the terminal's width (see terminalSize), read at each
	// update so that a resized terminal is followed.
	size func(io.Writer) (width, height int, ok bool)

	mu sync.Mutex
	// shown is the line on the terminal now, "" when none is.
	shown string
}

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, size: terminalSize}
}

// show replaces the line with line.
func (p *progressLine) show(line string) {
	if width, _, ok := p.size(p.w); ok {
		line = fitLine(line, width)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown = line
	_, _ = io.WriteString(p.w, "\r\x1b[K"+line)
}

// clear erases the line, leaving the cursor at its start for what follows.
func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown = ""
	_, _ = io.WriteString(p.w, "\r\x1b[K")
}

// say writes message on a line of its own above the progress line, which
// it then shows again; without a progress line shown, it only writes
// message.
func (p *progressLine) say(message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown == "" {
		_, _ = io.WriteString(p.w, message+"\n")
		return
	}
	_, _ = io.WriteString(p.w, "\r\x1b[K"+message+"\n"+p.shown)
}

// fitLine cuts line to width-1 cells, ending it with an ellipsis: the last
// column stays free, since some terminals wrap as soon as it is written.
func fitLine(line string, width int) string {
	if width < 2 {
		return line
	}
	return ansi.Truncate(line, width-1, "…")
}
