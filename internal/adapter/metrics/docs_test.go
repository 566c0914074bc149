package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/expiryctl/expiryctl/internal/adapter/metrics"
	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/promtooltest"
)

// docs is the repository's docs folder.
var docs = filepath.Join("..", "..", "..", "docs")

// metricName finds the names of expiryctl's metrics in PromQL and Markdown.
var metricName = regexp.MustCompile(`\bexpiryctl_[a-z0-9_]+\b`)

// exportedNames are the names of every metric expiryctl exports: those of a
// snapshot with every signal in it and of an ingest process.
func exportedNames(t *testing.T) []string {
	t.Helper()
	exp := metrics.NewExporter(&fakes.MetricsSource{Snap: fakes.MetricsSnapshot()}, metrics.Options{Now: fakes.Now})
	refresh(t, exp)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exp, metrics.NewIngestCounters("q"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range families {
		names = append(names, mf.GetName())
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics exported: %v", len(names), names)
	}
	return names
}

// TestAlertRules runs what `make alerts` runs: the rules are valid, and
// their unit tests fire every alert on synthetic series.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(docs, "alerts")
	if out, err := promtooltest.Run(t, dir, nil, "check", "rules", "expiryctl.rules.yml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err := promtooltest.Run(t, dir, nil, "test", "rules", "expiryctl.rules_test.yml")
	if err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestEveryAlertIsTested: each alert of the rules file fires in at least
// one unit test, so an alert added without a test fails here.
func TestEveryAlertIsTested(t *testing.T) {
	t.Parallel()
	rules := readDoc(t, "alerts", "expiryctl.rules.yml")
	tests := readDoc(t, "alerts", "expiryctl.rules_test.yml")
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllStringSubmatch(rules, -1)
	if len(alerts) < 5 {
		t.Fatalf("found %d alerts in the rules file", len(alerts))
	}
	// An alert fires in a test when its alertname is followed by expected
	// alerts that are not the empty list.
	fired := map[string]bool{}
	for _, m := range regexp.MustCompile(`alertname: (\S+)\n\s*exp_alerts:\n`).FindAllStringSubmatch(tests, -1) {
		fired[m[1]] = true
	}
	for _, a := range alerts {
		if !fired[a[1]] {
			t.Errorf("alert %s fires in no test of expiryctl.rules_test.yml", a[1])
		}
	}
}

// TestEveryAlertHasItsRunbookSection: the on-call engineer follows an
// alert's runbook annotation to the section for that alert, so each one
// must name a heading of docs/runbook.md, and each alert have one.
func TestEveryAlertHasItsRunbookSection(t *testing.T) {
	t.Parallel()
	rules := readDoc(t, "alerts", "expiryctl.rules.yml")
	runbook := readDoc(t, "runbook.md")
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(runbook, -1) {
		anchors[githubAnchor(m[1])] = true
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllStringSubmatchIndex(rules, -1)
	for i, a := range alerts {
		name := rules[a[2]:a[3]]
		end := len(rules)
		if i+1 < len(alerts) {
			end = alerts[i+1][0]
		}
		m := regexp.MustCompile(`(?m)^\s*runbook: docs/runbook\.md#(\S+)$`).FindStringSubmatch(rules[a[1]:end])
		switch {
		case m == nil:
			t.Errorf("alert %s has no runbook annotation pointing at a section of docs/runbook.md", name)
		case m[1] != strings.ToLower(name):
			t.Errorf("alert %s points at #%s, want its own section #%s", name, m[1], strings.ToLower(name))
		case !anchors[m[1]]:
			t.Errorf("alert %s points at #%s: docs/runbook.md has no such heading", name, m[1])
		}
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRulesAndDashboardUseRealMetrics: a renamed metric breaks the alert
// or the panel over it silently (an absent series never fires), so every
// name they use must be one expiryctl exports.
func TestRulesAndDashboardUseRealMetrics(t *testing.T) {
	t.Parallel()
	exported := exportedNames(t)
	check := func(where, expr string) {
		t.Helper()
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q uses no expiryctl metric", where, expr)
		}
		for _, n := range names {
			if !slices.Contains(exported, n) {
				t.Errorf("%s: %s is not a metric expiryctl exports (it exports %v)", where, n, exported)
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?s)expr: \|?\n?(.*?)\n\s*for:`).FindAllStringSubmatch(readDoc(t, "alerts", "expiryctl.rules.yml"), -1) {
		check("expiryctl.rules.yml", m[1])
	}

	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readDoc(t, "dashboards", "expiryctl.json")), &dash); err != nil {
		t.Fatalf("docs/dashboards/expiryctl.json: %v", err)
	}
	used := map[string]bool{}
	graphs := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		graphs++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			check("dashboard panel "+p.Title, q.Expr)
			for _, n := range metricName.FindAllString(q.Expr, -1) {
				used[n] = true
			}
		}
	}
	if graphs < 10 {
		t.Errorf("the dashboard has %d panels", graphs)
	}
	for _, n := range exported {
		if strings.HasPrefix(n, "expiryctl_") && !used[n] {
			t.Errorf("no dashboard panel shows %s", n)
		}
	}
}

// TestDashboardQueriesParse hands every panel's query to promtool as a
// recording rule, so that a query Prometheus would refuse fails here
// rather than as an empty panel.
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readDoc(t, "dashboards", "expiryctl.json")), &dash); err != nil {
		t.Fatal(err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			n++
			expr, err := json.Marshal(q.Expr) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", n, expr)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yml"), []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := promtooltest.Run(t, dir, nil, "check", "rules", "dashboard.rules.yml"); err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s\n%s", n, err, out, rules.String())
	}
}

// TestEveryMetricIsDocumented holds docs/metrics.md to what is exported.
func TestEveryMetricIsDocumented(t *testing.T) {
	t.Parallel()
	// A metric is documented by a row of one of the tables, which starts
	// with its name.
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(expiryctl_[a-z0-9_]+)`").FindAllStringSubmatch(readDoc(t, "metrics.md"), -1) {
		documented = append(documented, m[1])
	}
	exported := exportedNames(t)
	for _, n := range exported {
		if strings.HasPrefix(n, "expiryctl_") && !slices.Contains(documented, n) {
			t.Errorf("docs/metrics.md does not describe %s", n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(exported, n) {
			t.Errorf("docs/metrics.md names %s, which expiryctl does not export", n)
		}
	}
}

func readDoc(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{docs}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
