package commands

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"
)

// defaultPager is the pager when neither EXPIRYCTL_PAGER nor PAGER is set.
// It runs with LESS=FRX unless LESS is set, as git and gh run it: quit at
// once when the view fits one screen (F), show colours (R), leave the view
// on the screen after quitting (X).
const defaultPager = "less"

// pager sends a long human view through the user's pager, the way git and
// gh do: on a terminal only, when the view is taller than the screen (or
// the screen's height is unknown). EXPIRYCTL_PAGER, else PAGER, names it
// (run by sh, so it may carry arguments: "less -S"); set empty or to
// "cat", or with --no-pager, there is none. -o json and a watch never go
// through it.
type pager struct {
	off       bool
	lookupEnv func(string) (string, bool)
	lookPath  func(string) (string, error)
}

// addPagerFlag registers --no-pager on cmd.
func addPagerFlag(cmd *cobra.Command, f *Factory) *pager {
	p := &pager{lookupEnv: f.lookupEnv, lookPath: exec.LookPath}
	cmd.Flags().BoolVar(&p.off, "no-pager", false, "write the view straight to the terminal, not through $EXPIRYCTL_PAGER or $PAGER")
	return p
}

// command is the pager to run, empty for none.
func (p *pager) command() string {
	if p == nil || p.off {
		return ""
	}
	for _, name := range []string{"EXPIRYCTL_PAGER", "PAGER"} {
		if v, ok := p.lookupEnv(name); ok {
			if v = strings.TrimSpace(v); v == "cat" {
				return ""
			}
			return v
		}
	}
	// A machine without less gets the view directly, as with PAGER=cat.
	if _, err := p.lookPath(defaultPager); err != nil {
		return ""
	}
	return defaultPager
}

// show writes what render writes to streams: through the pager when there
// is one, stdout is a terminal and the view is taller than it; directly
// otherwise. A pager that cannot be run is said on stderr, and the view
// written directly.
func (p *pager) show(streams *IOStreams, render func(*IOStreams) error) error {
	command := p.command()
	if command == "" || !streams.StdoutTTY {
		return render(streams)
	}
	var view bytes.Buffer
	buffered := *streams
	buffered.Out = &view
	// The buffer is no terminal, but the view is for the one it goes to:
	// it is laid out to that terminal's width.
	if width, height, ok := streams.terminal(); ok {
		buffered.TerminalSize = func() (int, int, bool) { return width, height, true }
	}
	err := render(&buffered)
	if _, height, ok := streams.terminal(); ok && bytes.Count(view.Bytes(), []byte("\n")) < height {
		return errors.Join(err, writeAll(streams.Out, view.Bytes()))
	}
	if perr := p.run(command, streams, view.Bytes()); perr != nil {
		fmt.Fprintf(streams.ErrOut, "warning: the pager %q did not run (%v): set EXPIRYCTL_PAGER or PAGER to one that does, or pass --no-pager\n", command, perr)
		return errors.Join(err, writeAll(streams.Out, view.Bytes()))
	}
	return err
}

// run runs command through sh with view on its stdin. Its exit status is
// its own business (a pager quit with Ctrl-C exits non-zero), except for
// sh's own 126 and 127: the command could not be run.
func (p *pager) run(command string, streams *IOStreams, view []byte) error {
	cmd := exec.Command("sh", "-c", command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(view), streams.Out, streams.ErrOut
	cmd.Env = os.Environ()
	for _, kv := range []string{"LESS=FRX", "LV=-c"} {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := p.lookupEnv(name); !set {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() != 126 && exit.ExitCode() != 127 {
		return nil
	}
	return err
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
