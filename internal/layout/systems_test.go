package layout_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// update rewrites the ratchet file with today's counts.
var update = flag.Bool("update", false, "rewrite "+ratchetFile+" with today's counts")

// core are the folders that are to name no queue system: each system's
// differences belong to its driver (issue 54). Until they all do, the
// ratchet below counts what is left, file by file, and lets it only fall.
var core = []string{"replay", "deadletter", "commands", "tui", "internal/view", "internal/service"}

// systemWord is what names one queue system, or speaks one system's words,
// in code: a driver's or a client library's import, the systems' constants
// and names, their queue names' prefixes, and RabbitMQ's own terms.
var systemWord = regexp.MustCompile(`internal/adapter/(broker|sqsqueue|riverjobs|bullmq|jobtable|pgboss)"|amqp091-go|aws-sdk-go-v2|go-redis|riverqueue/river` +
	`|\b(RabbitMQ|SQS|River|BullMQ|JobTable|Redis|PgBoss)\b|pg-boss|QueueSystem\(|OrRabbitMQ` +
	`|arn:aws:sqs|river://|bullmq://|jobtable://|pgboss://|sqs://|amqp://|\bExchange\b|RoutingKey|AckThrough|management API`)

// ratchetFile records, for each core file that still names a system, how
// many of its lines do.
const ratchetFile = "testdata/system_words.txt"

// TestCoreNamesNoMoreSystemsThanBefore counts, in every core file (tests
// left out), the lines that name a queue system or speak one system's
// words, and fails when a file has more than testdata/system_words.txt
// allows, or is not listed and has any: new code reaches a system through
// its driver. A file whose count fell passes, and the test says to lower
// its line (go test ./internal/layout -run TestCoreNamesNoMoreSystemsThanBefore -update).
func TestCoreNamesNoMoreSystemsThanBefore(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	counts := map[string]int{}
	for _, folder := range core {
		err := filepath.WalkDir(filepath.Join(root, folder), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			n, err := countSystemLines(p)
			if err != nil {
				return err
			}
			if n > 0 {
				rel, _ := filepath.Rel(root, p)
				counts[filepath.ToSlash(rel)] = n
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if *update {
		writeRatchet(t, filepath.Join(root, "internal/layout", ratchetFile), counts)
		return
	}
	allowed := readRatchet(t, filepath.Join(root, "internal/layout", ratchetFile))
	var files []string
	for f := range counts {
		files = append(files, f)
	}
	sort.Strings(files)
	total, was := 0, 0
	for _, f := range files {
		total += counts[f]
		if counts[f] > allowed[f] {
			t.Errorf("%s names a queue system on %d lines, %d more than %s allows: reach the system through its driver instead",
				f, counts[f], counts[f]-allowed[f], ratchetFile)
		}
	}
	var lower []string
	for f, n := range allowed {
		was += n
		if counts[f] < n {
			lower = append(lower, fmt.Sprintf("%s %d → %d", f, n, counts[f]))
		}
	}
	slices.Sort(lower)
	if len(lower) > 0 {
		t.Logf("fewer lines name a system than %s says (%s): lower it with -update", ratchetFile, strings.Join(lower, ", "))
	}
	t.Logf("core lines that name a queue system: %d (the ratchet allows %d)", total, was)
}

// countSystemLines counts the lines of a Go file that name a system,
// comments included: a comment that speaks one system's words is the
// same debt as code.
func countSystemLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if systemWord.MatchString(s.Text()) {
			n++
		}
	}
	return n, s.Err()
}

func readRatchet(t *testing.T, path string) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: write it with go test ./internal/layout -run TestCoreNamesNoMoreSystemsThanBefore -update", err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, count, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			t.Fatalf("%s: %q is not FILE COUNT", path, line)
		}
		out[file] = n
	}
	return out
}

func writeRatchet(t *testing.T, path string, counts map[string]int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Core files that still name a queue system, and on how many lines\n" +
		"# (internal/layout/systems_test.go). A count may only fall; a driver\n" +
		"# takes what the file named. Regenerate with -update.\n")
	files := make([]string, 0, len(counts))
	for f := range counts {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(&b, "%s %d\n", f, counts[f])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
