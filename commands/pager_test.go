package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestPagerCommand(t *testing.T) {
	t.Parallel()
	haveLess := func(string) (string, error) { return "/usr/bin/less", nil }
	noLess := func(string) (string, error) { return "", errors.New("not found") }
	for _, c := range []struct {
		name     string
		env      map[string]string
		off      bool
		lookPath func(string) (string, error)
		want     string
	}{
		{name: "nothing set: less", lookPath: haveLess, want: "less"},
		{name: "nothing set and no less: none", lookPath: noLess, want: ""},
		{name: "PAGER", env: map[string]string{"PAGER": "most -s"}, want: "most -s"},
		{name: "PAGER empty: none", env: map[string]string{"PAGER": ""}, lookPath: haveLess, want: ""},
		{name: "PAGER cat: none", env: map[string]string{"PAGER": "cat"}, lookPath: haveLess, want: ""},
		{name: "EXPIRYCTL_PAGER over PAGER", env: map[string]string{"PAGER": "more", "EXPIRYCTL_PAGER": "less -S"}, want: "less -S"},
		{name: "EXPIRYCTL_PAGER empty: none, whatever PAGER says", env: map[string]string{"PAGER": "more", "EXPIRYCTL_PAGER": ""}, want: ""},
		{name: "EXPIRYCTL_PAGER cat: none", env: map[string]string{"PAGER": "more", "EXPIRYCTL_PAGER": " cat "}, want: ""},
		{name: "--no-pager: none", env: map[string]string{"PAGER": "more"}, off: true, lookPath: haveLess, want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := &pager{off: c.off, lookPath: c.lookPath, lookupEnv: func(k string) (string, bool) {
				v, ok := c.env[k]
				return v, ok
			}}
			if got := p.command(); got != c.want {
				t.Errorf("pager = %q, want %q", got, c.want)
			}
		})
	}
	t.Run("no pager at all", func(t *testing.T) {
		t.Parallel()
		if got := (*pager)(nil).command(); got != "" {
			t.Errorf("a command without --no-pager has pager %q", got)
		}
	})
}

// pagedWorld is a command's run on a terminal of the given height whose
// pager is a shell command recording its standard input and the LESS it
// was given in dir.
type pagedWorld struct {
	dir    string
	env    map[string]string
	height int
	tty    bool
}

func newPagedWorld(t *testing.T) *pagedWorld {
	dir := t.TempDir()
	return &pagedWorld{dir: dir, height: 10, tty: true, env: map[string]string{
		"EXPIRYCTL_PAGER": `printf '%s' "$LESS" > ` + filepath.Join(dir, "less") + ` && cat > ` + filepath.Join(dir, "got"),
	}}
}

func (w *pagedWorld) run(t *testing.T, cmd func(*Factory) *cobra.Command, args ...string) (out, errOut string) {
	t.Helper()
	f, stdout, stderr := testFactory(t)
	f.Now = fakes.Now
	f.LookupEnv = func(k string) (string, bool) {
		v, ok := w.env[k]
		return v, ok
	}
	if w.tty {
		onTerminal(f, 100, w.height)
	}
	if err := runCmd(cmd(f), args...); err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String()
}

// paged is what the pager got, and whether it ran.
func (w *pagedWorld) paged(t *testing.T) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, "got"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestLongViewsGoThroughThePager(t *testing.T) {
	t.Parallel()
	dlqShow := func(f *Factory) *cobra.Command {
		return NewCmdDLQShow(f, func(ctx context.Context, o *DLQShowOptions) error {
			o.Archive = serve[service.Archive](fakes.Letters(3))
			return dlqShowRun(ctx, o)
		})
	}
	replayShow := func(f *Factory) *cobra.Command {
		return NewCmdReplayShow(f, func(ctx context.Context, o *ReplayShowOptions) error {
			o.Requests = serve[service.Requests](fakes.NewRequests("bob", fakes.Request(7, "alice", 30)))
			o.Planner = serve[service.Planner](&fakes.Planner{Result: examplePlan()})
			return replayShowRun(ctx, o)
		})
	}
	for _, c := range []struct {
		name string
		cmd  func(*Factory) *cobra.Command
		args []string
		want string
	}{
		{"dlq show", dlqShow, []string{"2"}, "r-2"},
		{"replay show", replayShow, []string{"7"}, "Cohort (20 of 30)"},
	} {
		t.Run(c.name+" taller than the terminal", func(t *testing.T) {
			t.Parallel()
			w := newPagedWorld(t)
			out, _ := w.run(t, c.cmd, c.args...)
			got, ran := w.paged(t)
			if !ran || !strings.Contains(got, c.want) || out != "" {
				t.Fatalf("the pager ran %v and got:\n%s\nstdout:\n%s", ran, got, out)
			}
			if less, _ := os.ReadFile(filepath.Join(w.dir, "less")); string(less) != "FRX" {
				t.Errorf("the pager ran with LESS=%q, want FRX", less)
			}
		})
		t.Run(c.name+" keeps the user's LESS", func(t *testing.T) {
			t.Parallel()
			w := newPagedWorld(t)
			w.env["LESS"] = "-iR"
			w.run(t, c.cmd, c.args...)
			// The process's own LESS reaches the pager; expiryctl adds
			// none over it.
			if less, _ := os.ReadFile(filepath.Join(w.dir, "less")); string(less) == "FRX" {
				t.Errorf("the pager ran with LESS=FRX over the user's own")
			}
		})
		t.Run(c.name+" fitting the terminal", func(t *testing.T) {
			t.Parallel()
			w := newPagedWorld(t)
			w.height = 500
			out, _ := w.run(t, c.cmd, c.args...)
			if _, ran := w.paged(t); ran || !strings.Contains(out, c.want) {
				t.Fatalf("a view that fits went through the pager (%v):\n%s", ran, out)
			}
		})
		for _, off := range []struct {
			name string
			set  func(*pagedWorld) []string
		}{
			{"piped", func(w *pagedWorld) []string { w.tty = false; return nil }},
			{"--no-pager", func(*pagedWorld) []string { return []string{"--no-pager"} }},
			{"EXPIRYCTL_PAGER=cat", func(w *pagedWorld) []string { w.env["EXPIRYCTL_PAGER"] = "cat"; return nil }},
			{"PAGER empty", func(w *pagedWorld) []string { delete(w.env, "EXPIRYCTL_PAGER"); w.env["PAGER"] = ""; return nil }},
			{"-o json", func(*pagedWorld) []string { return []string{"-o", "json"} }},
		} {
			t.Run(c.name+" "+off.name+": no pager", func(t *testing.T) {
				t.Parallel()
				w := newPagedWorld(t)
				args := append(off.set(w), c.args...)
				out, _ := w.run(t, c.cmd, args...)
				if _, ran := w.paged(t); ran || out == "" {
					t.Fatalf("the pager ran (%v), stdout:\n%s", ran, out)
				}
			})
		}
		t.Run(c.name+" with a pager that does not run", func(t *testing.T) {
			t.Parallel()
			w := newPagedWorld(t)
			w.env["EXPIRYCTL_PAGER"] = filepath.Join(w.dir, "no-such-pager")
			out, errOut := w.run(t, c.cmd, c.args...)
			if !strings.Contains(out, c.want) || !strings.Contains(errOut, "did not run") {
				t.Fatalf("stdout:\n%s\nstderr: %s", out, errOut)
			}
		})
	}
}
