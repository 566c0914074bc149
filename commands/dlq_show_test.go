package commands

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

func TestDLQShowRun(t *testing.T) {
	t.Parallel()
	show := func(t *testing.T, archive *fakes.Archive, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.Now = fakes.Now
		err := runCmd(NewCmdDLQShow(f, func(ctx context.Context, o *DLQShowOptions) error {
			o.Archive = serve[service.Archive](archive)
			return dlqShowRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	hostile := func() *fakes.Archive {
		a := fakes.NewArchive(fakes.HostileLetter(7))
		a.SetDetail(fakes.DetailOf(fakes.HostileLetter(7), []byte(fakes.Hostile)))
		return a
	}

	t.Run("the letter, escaped", func(t *testing.T) {
		t.Parallel()
		archive := hostile()
		out, _, err := show(t, archive, "7")
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Fatalf("show let a control character through:\n%q", out)
		}
		for _, want := range []string{`r-\x1b[2J7`, "reservations", "x-death"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		if len(archive.Shows) != 1 || archive.Shows[0] != 7 {
			t.Fatalf("shown %v, want [7]", archive.Shows)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := show(t, fakes.Letters(3), "2", "-o", "json")
		var got map[string]any
		if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["id"] != 2.0 || got["reservation_id"] != "r-2" {
			t.Fatalf("json = %v, %v:\n%s", got, err, out)
		}
	})
	t.Run("save the exact payload", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "payload.bin")
		_, errOut, err := show(t, hostile(), "7", "--save-payload", path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != fakes.Hostile {
			t.Fatalf("saved %q (%v), want the payload's bytes", got, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("payload file mode %v, want 0600", fi.Mode())
		}
		if !strings.Contains(errOut, "wrote 49 payload bytes to "+path) {
			t.Fatalf("stderr %q", errOut)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		out, _, err := show(t, fakes.Letters(3), "42")
		wantExit(t, err, ExitNotFound)
		if out != "" {
			t.Fatalf("printed %q", out)
		}
	})
	t.Run("negative payload limit is a flag error", func(t *testing.T) {
		t.Parallel()
		_, _, err := show(t, fakes.Letters(3), "1", "--payload-limit", "-1")
		wantExit(t, err, ExitUsage)
	})
}
