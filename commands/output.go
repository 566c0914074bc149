package commands

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"

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
type table struct {
	io      *IOStreams
	headers []string
	rows    [][]string
}

func newTable(streams *IOStreams, headers ...string) *table {
	return &table{io: streams, headers: headers}
}

func (t *table) addRow(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = termsafe.EscapeLine(c)
	}
	t.rows = append(t.rows, safe)
}

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
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.headers, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	text := buf.String()
	// A row wider than the terminal would wrap into the next one and break
	// the columns: it is cut at the right edge instead, where the longest
	// cells (queues, error text) are; -o json has every cell whole.
	if width, _, ok := terminalSize(t.io.Out); ok {
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		for i, l := range lines {
			lines[i] = ansi.Truncate(l, width, "…")
		}
		text = strings.Join(lines, "\n") + "\n"
	}
	header, rest, _ := strings.Cut(text, "\n")
	// The header is styled after alignment so escape codes do not skew widths.
	_, err := io.WriteString(t.io.Out, styles(t.io).header.Render(header)+"\n"+rest)
	return err
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
