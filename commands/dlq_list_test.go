package commands

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/service"
)

// dlqList runs `dlq list args` over archive, piped.
func dlqList(t *testing.T, archive *fakes.Archive, args ...string) (string, string, error) {
	t.Helper()
	f, out, errOut := testFactory(t)
	f.Now = fakes.Now
	err := runCmd(NewCmdDLQList(f, func(ctx context.Context, o *DLQListOptions) error {
		o.Archive = serve[service.Archive](archive)
		return dlqListRun(ctx, o)
	}), args...)
	return out.String(), errOut.String(), err
}

func TestDLQListRun(t *testing.T) {
	t.Parallel()
	t.Run("a page, newest first, with the next page's cursor on stderr", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := dlqList(t, fakes.Letters(5), "--limit", "3")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || lines[0] != strings.Join(listHeaders, "\t") ||
			!strings.HasPrefix(lines[1], "5\t") || !strings.HasPrefix(lines[3], "3\t") {
			t.Fatalf("list printed:\n%s", out)
		}
		token, ok := strings.CutPrefix(strings.TrimSpace(errOut), "next page: --after ")
		if !ok {
			t.Fatalf("stderr %q names no next page", errOut)
		}
		if c, err := deadletter.ParseCursor(token); err != nil || c.ID != 3 {
			t.Fatalf("next page cursor %q = %+v, %v; want letter 3's", token, c, err)
		}
		// The cursor continues where the page ended.
		out, errOut, err = dlqList(t, fakes.Letters(5), "--limit", "3", "--after", token)
		if err != nil || !strings.HasPrefix(strings.Split(out, "\n")[1], "2\t") || errOut != "" {
			t.Fatalf("second page: %v\n%s\nstderr %q", err, out, errOut)
		}
	})
	t.Run("filter by reason", func(t *testing.T) {
		t.Parallel()
		out, _, err := dlqList(t, fakes.Letters(8), "--reason", "validation")
		if err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
		if len(rows) != 2 || !strings.Contains(rows[0], "\tvalidation\t") || !strings.Contains(rows[1], "\tvalidation\t") {
			t.Fatalf("validation letters:\n%s", out)
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := dlqList(t, fakes.Letters(3), "--search", "no-such-reservation")
		if err != nil || out != "" || errOut != "no dead letters match\n" {
			t.Fatalf("empty list = %v, %q, %q", err, out, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := dlqList(t, fakes.Letters(3), "-o", "json")
		var rows []deadletter.Row
		if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 || rows[0].ID != 3 {
			t.Fatalf("json = %v, %v:\n%s", rows, err, out)
		}
	})
	t.Run("csv keeps the stored text", func(t *testing.T) {
		t.Parallel()
		out, _, err := dlqList(t, fakes.NewArchive(fakes.HostileLetter(1)), "-o", "csv")
		if err != nil {
			t.Fatal(err)
		}
		records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil || len(records) != 2 || strings.Join(records[0], ",") != strings.Join(csvHeaders, ",") {
			t.Fatalf("csv = %v, %v:\n%s", records, err, out)
		}
		lastError := records[1][slices.Index(csvHeaders, "last_error")]
		if lastError != fakes.Hostile {
			t.Fatalf("csv last_error = %q, want the stored bytes", lastError)
		}
		if system := records[1][slices.Index(csvHeaders, "system")]; system != "rabbitmq" {
			t.Fatalf("csv system = %q, want rabbitmq", system)
		}
	})
	t.Run("table escapes what a letter carries", func(t *testing.T) {
		t.Parallel()
		out, _, err := dlqList(t, fakes.NewArchive(fakes.HostileLetter(1)))
		if err != nil || strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Fatalf("table = %v:\n%q", err, out)
		}
	})
	for _, format := range []string{"table", "json", "csv"} {
		t.Run("limit 0 streams every match as "+format, func(t *testing.T) {
			t.Parallel()
			out, errOut, err := dlqList(t, fakes.Letters(2500), "--limit", "0", "-o", format)
			if err != nil || errOut != "" {
				t.Fatalf("stream: %v, stderr %q", err, errOut)
			}
			var n int
			switch format {
			case "json":
				var rows []deadletter.Row
				if err := json.Unmarshal([]byte(out), &rows); err != nil {
					t.Fatalf("streamed json does not parse: %v", err)
				}
				n = len(rows)
			case "csv":
				records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				n = len(records) - 1
			default:
				// The header is repeated for each chunk of 1000 rows.
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					if !strings.HasPrefix(l, "ID\t") {
						n++
					}
				}
			}
			if n != 2500 {
				t.Fatalf("streamed %d rows as %s, want 2500", n, format)
			}
		})
	}
}
