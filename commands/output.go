package commands

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/view/linewrap"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
)

// outputFormat is the value of -o/--output, restricted to the formats a
// command supports.
type outputFormat struct {
	value   string
	allowed []string
}

func (o *outputFormat) String() string { return o.value }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(v string) error {
	for _, a := range o.allowed {
		if v == a {
			o.value = v
			return nil
		}
	}
	return fmt.Errorf("invalid output format %q: use %s", v, orList(o.allowed))
}

// addOutputFlag registers -o/--output with its allowed values and completion.
func addOutputFlag(cmd *cobra.Command, allowed ...string) *outputFormat {
	o := &outputFormat{value: allowed[0], allowed: allowed}
	cmd.Flags().VarP(o, "output", "o", "output format: "+orList(allowed))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
	return o
}

func orList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows for people: aligned columns with a bold header on a
// terminal, tab-separated values without a header decoration when piped. Every
// cell is escaped, so stored text can never drive the terminal.
//
// On a terminal a row never wraps: when the rows are wider than the
// terminal, the columns named truncatable give up their width first, widest
// first, their cells cut with an ellipsis, so that ids and states stay
// whole; when those are down to their headers and the rows are still too
// wide, they are left out, the first named first; only then is the row cut
// at the right edge. -o json and -o csv have every cell whole.
type table struct {
	io      *IOStreams
	headers []string
	rows    [][]string
	shrink  []int
	// ends marks the columns of identifiers, cut in the middle.
	ends []bool
}

func newTable(streams *IOStreams, headers ...string) *table {
	return &table{io: streams, headers: headers}
}

// truncatable names the columns that give up width when a row is wider than
// the terminal, the one that matters least first: free text (an error, a
// reason, details) and what a person can read in -o json, never what they
// look a row up by. A header the table does not have is a programming
// error, which every command's tests run into.
func (t *table) truncatable(headers ...string) *table {
	for _, h := range headers {
		i := slices.Index(t.headers, h)
		if i < 0 {
			panic(fmt.Sprintf("table has no column %q to truncate (columns: %s)", h, strings.Join(t.headers, ", ")))
		}
		t.shrink = append(t.shrink, i)
	}
	return t
}

// keepEnds names the truncatable columns that hold identifiers, such as
// queue names, whose cells are cut in the middle rather than at the end
// when the column gives up width: names in a family share their beginning
// (reservation-expiry.retry.1000, reservation-expiry.retry.5000) and differ
// at the end, which a cut at the end would make identical. A header the
// table does not have is a programming error, as in truncatable.
func (t *table) keepEnds(headers ...string) *table {
	if t.ends == nil {
		t.ends = make([]bool, len(t.headers))
	}
	for _, h := range headers {
		i := slices.Index(t.headers, h)
		if i < 0 {
			panic(fmt.Sprintf("table has no column %q to cut in the middle (columns: %s)", h, strings.Join(t.headers, ", ")))
		}
		t.ends[i] = true
	}
	return t
}

func (t *table) addRow(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = termsafe.EscapeLine(c)
	}
	t.rows = append(t.rows, safe)
}

// columnGap is the space between two columns on a terminal.
const columnGap = 2

func (t *table) render() error {
	if !t.io.StdoutTTY {
		w := t.io.Out
		fmt.Fprintln(w, strings.Join(t.headers, "\t"))
		for _, r := range t.rows {
			if _, err := fmt.Fprintln(w, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	widths := make([]int, len(t.headers))
	for _, r := range append([][]string{t.headers}, t.rows...) {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], ansi.StringWidth(c))
			}
		}
	}
	width, _, fits := t.io.terminal()
	shown := t.columns(widths, width, fits)
	var b strings.Builder
	for _, r := range append([][]string{t.headers}, t.rows...) {
		line := strings.TrimRight(alignRow(r, widths, shown, t.ends), " ")
		// Should the columns that may shrink not be enough, the row is cut
		// at the right edge rather than wrapped into the next one.
		if fits {
			line = ansi.Truncate(line, width, "…")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	header, rest, _ := strings.Cut(b.String(), "\n")
	// The header is styled after alignment so escape codes do not skew widths.
	_, err := io.WriteString(t.io.Out, styles(t.io).header.Render(header)+"\n"+rest)
	return err
}

// columns narrows the truncatable columns of widths, the widest first,
// until a row is at most width wide or each of them is down to its header
// (and at least a few characters); then, while a row is still too wide,
// it leaves them out, the first named first. It returns the columns shown.
func (t *table) columns(widths []int, width int, fits bool) []bool {
	shown := make([]bool, len(widths))
	for i := range shown {
		shown[i] = true
	}
	if !fits {
		return shown
	}
	total := columnGap * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	for ; total > width; total-- {
		widest := -1
		for _, i := range t.shrink {
			floor := max(ansi.StringWidth(t.headers[i]), 5)
			if i < len(t.ends) && t.ends[i] {
				// An identifier cut shorter than this keeps too little
				// of either end to tell it from its siblings.
				floor = max(floor, idFloor)
			}
			if widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		widths[widest]--
	}
	for _, i := range t.shrink {
		if total <= width {
			break
		}
		shown[i] = false
		total -= widths[i] + columnGap
	}
	return shown
}

// alignRow pads each shown cell to its column's width, cutting a cell wider
// than that with an ellipsis, in the middle in the columns ends marks; the
// last cell is not padded, so that no line ends in spaces.
func alignRow(cells []string, widths []int, shown, ends []bool) string {
	last := -1
	for i := range cells {
		if i < len(shown) && shown[i] {
			last = i
		}
	}
	var b strings.Builder
	first := true
	for i, c := range cells {
		if i > last {
			break
		}
		if !shown[i] {
			continue
		}
		if !first {
			b.WriteString(strings.Repeat(" ", columnGap))
		}
		first = false
		if ansi.StringWidth(c) > widths[i] {
			if i < len(ends) && ends[i] {
				c = cutMiddle(c, widths[i])
			} else {
				c = ansi.Truncate(c, widths[i], "…")
			}
		}
		b.WriteString(c)
		if i < last {
			b.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)))
		}
	}
	return b.String()
}

// idFloor is the narrowest a keepEnds column shrinks to before the table
// leaves columns out: cut in the middle, 5 columns of the start and 12 of
// the end ("replay_request:40" fits whole, "queue:…-dead-letter-queue" is
// still told apart).
const idFloor = 18

// cutMiddle shortens s to width columns with an ellipsis in the middle,
// keeping twice as much of its end as of its beginning: the end of an
// identifier is what tells it from its siblings, the beginning which family
// it belongs to.
func cutMiddle(s string, width int) string {
	n := ansi.StringWidth(s)
	if n <= width {
		return s
	}
	if width < 3 {
		return ansi.Truncate(s, width, "…")
	}
	head := (width - 1) / 3
	tail := width - 1 - head
	return ansi.Cut(s, 0, head) + "…" + ansi.Cut(s, n-tail, n)
}

// wrapFields wraps each line of a labelled view (a label, then its value
// from column indent on) that is wider than the terminal, the rest of the
// value on the lines below under its start, so that the terminal wraps
// nothing under the labels. Piped, or on a terminal too narrow to leave
// the value some room, the view is as it was.
func wrapFields(streams *IOStreams, view string, indent int) string {
	width, _, ok := streams.terminal()
	if !ok {
		return view
	}
	return linewrap.Hanging(view, width, indent)
}

// csvWriter writes rows as RFC 4180 CSV. Cells are written as stored: CSV is
// for programs, and escaping would change the data.
type csvWriter struct{ w *csv.Writer }

func newCSV(w io.Writer, headers ...string) (*csvWriter, error) {
	c := &csvWriter{w: csv.NewWriter(w)}
	return c, c.w.Write(headers)
}

func (c *csvWriter) row(cells ...string) error { return c.w.Write(cells) }
func (c *csvWriter) flush() error              { c.w.Flush(); return c.w.Error() }

type styleSet struct {
	header, dim, warn, title lipgloss.Style
}

func styles(streams *IOStreams) styleSet {
	r := lipgloss.NewRenderer(streams.Out)
	// Color decides, not the writer: a --watch draws each frame into a
	// buffer, which lipgloss alone would take for a pipe.
	profile := termenv.Ascii
	if streams.Color {
		profile = termenv.ANSI
	}
	r.SetColorProfile(profile)
	return styleSet{
		header: r.NewStyle().Bold(true),
		dim:    r.NewStyle().Faint(true),
		warn:   r.NewStyle().Foreground(lipgloss.Color("3")),
		title:  r.NewStyle().Bold(true).Underline(true),
	}
}
