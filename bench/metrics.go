package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/expiryctl/expiryctl/commands"
)

// benchMetrics is the metrics half of scenario 3. A scrape of `metrics
// serve` is answered from a snapshot taken in the background, so the two
// costs are measured apart: one scrape (HTTP GET /metrics of the built
// binary, started on each archive) and one snapshot refresh (the Source's
// Snapshot, in process, built by the same Factory.MetricsSource the
// command uses). Then the binary's peak RSS over 100 scrapes of the large
// archive while it refreshes every second.
func benchMetrics(ctx context.Context, cfg *config, rep *report, a archives) error {
	s, l := count(cfg.SmallN), count(cfg.LargeN)

	// The refresh interval is long so that no background snapshot lands in
	// the timed scrapes: they time the scrape alone.
	small, err := startMetricsServe(ctx, cfg, a.small.URL, time.Hour)
	if err != nil {
		return err
	}
	defer small.stop()
	large, err := startMetricsServe(ctx, cfg, a.large.URL, time.Hour)
	if err != nil {
		return err
	}
	defer large.stop()
	rounds := max(cfg.Runs*3, 30)
	base := &probe{name: "scrape " + s, fn: small.scrape}
	subj := &probe{name: "scrape " + l, fn: large.scrape}
	cfg.logf("metrics: GET /metrics of bin/expiryctl metrics serve, %d warm-up + %d timed rounds", cfg.Warmup, rounds)
	if err := measureInterleaved(ctx, cfg.Warmup, rounds, base, subj); err != nil {
		return err
	}
	small.stop()
	large.stop()
	rep.atMost(fmt.Sprintf("3 metrics scrape (GET /metrics of bin/expiryctl metrics serve), %s vs %s", l, s), base.median(), subj.median(), 2)

	smallSnap, closeSmall, err := metricsSnapshotProbe(ctx, "snapshot "+s, a.small.URL)
	if err != nil {
		return err
	}
	defer closeSmall()
	largeSnap, closeLarge, err := metricsSnapshotProbe(ctx, "snapshot "+l, a.large.URL)
	if err != nil {
		return err
	}
	defer closeLarge()
	// As many rounds as the scrapes: a snapshot is a few milliseconds,
	// within the noise of a shared machine, and a median of 31 moved by
	// half between two runs here.
	cfg.logf("metrics: Source.Snapshot in process, %d warm-up + %d timed rounds", cfg.Warmup, rounds)
	if err := measureInterleaved(ctx, cfg.Warmup, rounds, smallSnap, largeSnap); err != nil {
		return err
	}
	rep.atMost(fmt.Sprintf("3 metrics snapshot refresh (in-process MetricsSource.Snapshot, live queues left out), %s vs %s", l, s),
		smallSnap.median(), largeSnap.median(), 2)

	peak, snapshots, err := metricsPeakRSS(ctx, cfg, a.large.URL)
	if err != nil {
		return err
	}
	rep.rss(fmt.Sprintf("3 metrics serve %s: peak RSS over 100 scrapes, refreshed every 1s", l), peak, 50,
		fmt.Sprintf(" (%d snapshots)", snapshots))
	return nil
}

// metricsSnapshotProbe times one snapshot refresh on the archive at dbURL,
// through the Source `metrics serve` builds. The management API is pointed
// at a port that refuses at once: the live queues are the broker's, the
// same for both archives, and a constant added to both would flatter the
// ratio; the archive's and the replays' reads are what grow with size.
func metricsSnapshotProbe(ctx context.Context, name, dbURL string) (*probe, func(), error) {
	f := &commands.Factory{
		IO:                &commands.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard},
		Now:               time.Now,
		Getenv:            func(string) string { return "" },
		DatabaseURLFlag:   dbURL,
		ManagementURLFlag: "http://127.0.0.1:1/",
		ActorFlag:         "bench-metrics",
	}
	src, err := f.MetricsSource(ctx, "reservation-expiry")
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &probe{name: name, fn: func(ctx context.Context) error {
		snap, err := src.Snapshot(ctx)
		switch {
		case err != nil:
			return err
		case len(snap.Categories) == 0 || snap.Overdue == nil || snap.Overdue.Count == 0 || snap.Replay == nil:
			return fmt.Errorf("snapshot has %d categories, overdue %v, replay %v: want all of them", len(snap.Categories), snap.Overdue, snap.Replay)
		}
		return nil
	}}, f.Close, nil
}

// metricsServe is one running `bin/expiryctl metrics serve`.
type metricsServe struct {
	cmd     *exec.Cmd
	url     string
	client  *http.Client
	stderr  *stderrLog
	stopped bool
}

// stderrLog keeps what the exporter said, for the error when it fails; it
// is written while the exporter runs and read from the benchmark.
type stderrLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *stderrLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.WriteString(s + "\n")
}

func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.buf.String())
}

var servingRE = regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)

// startMetricsServe starts the built binary's exporter on dbURL on a free
// port and waits until it serves, which is after its first snapshot.
func startMetricsServe(ctx context.Context, cfg *config, dbURL string, interval time.Duration) (*metricsServe, error) {
	cmd := exec.CommandContext(ctx, cfg.Bin, "metrics", "serve", "--listen", "127.0.0.1:0", "--interval", interval.String())
	cmd.Env = append(os.Environ(), cfg.binaryEnv(dbURL)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w (build it with `make build`, or set EXPIRYCTL_BIN)", cfg.Bin, err)
	}
	m := &metricsServe{cmd: cmd, client: &http.Client{Timeout: 30 * time.Second}, stderr: &stderrLog{}}
	addr := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			m.stderr.line(sc.Text())
			if match := servingRE.FindStringSubmatch(sc.Text()); match != nil {
				select {
				case addr <- match[1]:
				default:
				}
			}
		}
	}()
	select {
	case m.url = <-addr:
		return m, nil
	case <-exited: // it failed before serving
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	m.stop()
	return nil, fmt.Errorf("%s metrics serve did not start serving: %s", cfg.Bin, m.stderr)
}

// scrape is one Prometheus scrape: the whole body read, as a server does.
func (m *metricsServe) scrape(ctx context.Context) error {
	_, err := m.get(ctx)
	return err
}

func (m *metricsServe) get(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", m.url, resp.Status)
	case !bytes.Contains(body, []byte("expiryctl_overdue_holds ")):
		return nil, fmt.Errorf("GET %s: the scrape has no expiryctl_overdue_holds", m.url)
	}
	return body, nil
}

// stop interrupts the exporter, as Ctrl-C would, and waits for it.
func (m *metricsServe) stop() {
	if m.stopped {
		return
	}
	m.stopped = true
	_ = m.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
}

var snapshotsRE = regexp.MustCompile(`(?m)^expiryctl_metrics_snapshots_total (\S+)$`)

// metricsPeakRSS runs the exporter on the archive at dbURL refreshing every
// second, scrapes it 100 times over a few seconds so that snapshots are
// taken between the scrapes, and returns its peak resident set size and
// how many snapshots it took.
func metricsPeakRSS(ctx context.Context, cfg *config, dbURL string) (int64, int, error) {
	m, err := startMetricsServe(ctx, cfg, dbURL, time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer m.stop()
	var last []byte
	for range 100 {
		if last, err = m.get(ctx); err != nil {
			return 0, 0, err
		}
		select {
		case <-time.After(40 * time.Millisecond):
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	peak := readVmHWM(m.cmd.Process.Pid)
	if peak == 0 {
		return 0, 0, fmt.Errorf("could not read the memory of metrics serve (pid %d): did it exit early?\n%s", m.cmd.Process.Pid, m.stderr.String())
	}
	snapshots := 0
	if match := snapshotsRE.FindSubmatch(last); match != nil {
		f, _ := strconv.ParseFloat(string(match[1]), 64)
		snapshots = int(f)
	}
	return peak, snapshots, nil
}
