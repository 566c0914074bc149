//go:build soak

package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The fates of a letter the soak's publisher sent.
const (
	letterUnsent byte = iota
	// letterConfirmed: the broker confirmed it, so it must end in the
	// archive (or the queue) exactly once.
	letterConfirmed
	// letterUnknown: its publish or confirm failed with the connection, so
	// the broker may or may not hold it.
	letterUnknown
)

// ratePublisher publishes worker letters to a queue at a steady rate with
// publisher confirms, reconnecting when the broker goes. Letter n is job n,
// its message id unique, so that the archive can be checked letter by
// letter. After an outage it goes on at the rate from then, rather than
// sending the letters it missed in a burst: the load stays steady.
type ratePublisher struct {
	stop context.CancelFunc
	done chan struct{}

	mu sync.Mutex
	// fate is each letter's, indexed by its job number.
	fate []byte
	// reconnects counts the connections lost while publishing.
	reconnects int
}

// pendingLetter is a letter sent and not yet confirmed.
type pendingLetter struct {
	n  int
	dc *amqp.DeferredConfirmation
}

func startRatePublisher(url, queue string, rate int) *ratePublisher {
	ctx, stop := context.WithCancel(context.Background())
	p := &ratePublisher{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		interval := time.Second / time.Duration(rate)
		n := 0
		for ctx.Err() == nil {
			conn, err := amqp.Dial(url)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			ch, err := conn.Channel()
			if err == nil {
				err = ch.Confirm(false)
			}
			var pending []pendingLetter
			next := time.Now()
			for err == nil && ctx.Err() == nil {
				for now := time.Now(); !next.After(now) && err == nil; next = next.Add(interval) {
					msg := newJob(n).workerLetter("db_timeout", "i/o timeout", 3)
					var dc *amqp.DeferredConfirmation
					if dc, err = ch.PublishWithDeferredConfirm("", queue, false, false, msg); err == nil {
						pending = append(pending, pendingLetter{n: n, dc: dc})
					} else {
						p.settle(pendingLetter{n: n}, false)
					}
					n++
				}
				pending = p.collect(pending)
				time.Sleep(5 * time.Millisecond)
			}
			// What was sent and not yet confirmed: the confirms in flight
			// when the publisher stops are awaited; those of a lost
			// connection end unacknowledged when amqp091 closes them.
			for _, l := range pending {
				wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ok, werr := l.dc.WaitContext(wait)
				cancel()
				p.settle(l, ok && werr == nil)
			}
			_ = conn.Close()
			if ctx.Err() == nil {
				p.mu.Lock()
				p.reconnects++
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// collect settles the letters at the head of pending whose confirm came.
func (p *ratePublisher) collect(pending []pendingLetter) []pendingLetter {
	for len(pending) > 0 {
		select {
		case <-pending[0].dc.Done():
			p.settle(pending[0], pending[0].dc.Acked())
			pending = pending[1:]
		default:
			return pending
		}
	}
	return pending
}

func (p *ratePublisher) settle(l pendingLetter, confirmed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.fate) <= l.n {
		p.fate = append(p.fate, letterUnsent)
	}
	p.fate[l.n] = letterUnknown
	if confirmed {
		p.fate[l.n] = letterConfirmed
	}
}

// finish stops publishing and waits for the confirms in flight.
func (p *ratePublisher) finish() { p.stop(); <-p.done }

// fates returns each letter's fate; call it after finish.
func (p *ratePublisher) fates() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fate
}

// soakSample is one second's reading of the ingest process.
type soakSample struct {
	at time.Duration
	// rss is VmRSS from /proc, in bytes; goroutines and heap (in use) are
	// the process's own go_goroutines and go_memstats_heap_inuse_bytes.
	rss, goroutines, heap float64
	// queued is the letters ready in the queue, -1 when unreadable.
	queued int
}

// capturePoint is the capture's count (stored and duplicates committed)
// at a moment.
type capturePoint struct {
	at       time.Time
	captured float64
}

// ingestWatch samples a running `dlq ingest --follow`: its committed
// letters ten times a second (from its metrics, so that a stall is timed
// to a tenth of a second), and its RSS, goroutines, heap and the queue's
// depth every second.
type ingestWatch struct {
	pid        int
	metricsURL string
	queue      func() int
	started    time.Time
	stop       context.CancelFunc
	done       chan struct{}

	// said is the ingest's stderr so far.
	said func() string

	mu      sync.Mutex
	samples []soakSample
	points  []capturePoint
	// losses are when each "lost …" line of the ingest's stderr was seen.
	losses []time.Time
	// scrapeErrors counts the scrapes that failed.
	scrapeErrors int
}

func watchIngest(pid int, metricsURL, queue string, queued func() int, said func() string) *ingestWatch {
	ctx, stop := context.WithCancel(context.Background())
	w := &ingestWatch{pid: pid, metricsURL: metricsURL, queue: queued, said: said, started: time.Now(), stop: stop, done: make(chan struct{})}
	captured := []string{
		`expiryctl_ingest_letters_total{outcome="stored",queue="` + queue + `"}`,
		`expiryctl_ingest_letters_total{outcome="duplicate",queue="` + queue + `"}`,
	}
	go func() {
		defer close(w.done)
		client := &http.Client{Timeout: 2 * time.Second}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		lastSecond := time.Duration(-1)
		toldLosses := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := strings.Count(w.said(), "\nlost "); n > toldLosses {
				w.mu.Lock()
				for ; toldLosses < n; toldLosses++ {
					w.losses = append(w.losses, time.Now())
				}
				w.mu.Unlock()
			}
			got, err := scrapeSamples(ctx, client, w.metricsURL)
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				w.scrapeErrors++
			} else {
				w.points = append(w.points, capturePoint{at: now, captured: got[captured[0]] + got[captured[1]]})
			}
			w.mu.Unlock()
			second := now.Sub(w.started).Truncate(time.Second)
			if second == lastSecond || err != nil {
				continue
			}
			lastSecond = second
			s := soakSample{at: now.Sub(w.started), rss: vmRSS(w.pid), goroutines: got["go_goroutines"],
				heap: got["go_memstats_heap_inuse_bytes"], queued: w.queue()}
			w.mu.Lock()
			w.samples = append(w.samples, s)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *ingestWatch) finish() { w.stop(); <-w.done }

// captured is the latest count of letters committed.
func (w *ingestWatch) captured() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.points) == 0 {
		return 0
	}
	return w.points[len(w.points)-1].captured
}

// advancedAfter is when the count first rose above what it was at from,
// or false if it has not yet.
func (w *ingestWatch) advancedAfter(from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	base := -1.0
	for _, p := range w.points {
		if p.at.Before(from) {
			base = p.captured
			continue
		}
		if base >= 0 && p.captured > base {
			return p.at, true
		}
		if base < 0 {
			base = p.captured
		}
	}
	return time.Time{}, false
}

// firstLoss is when the ingest first said it lost a server within
// [from, to), or false.
func (w *ingestWatch) firstLoss(from, to time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.losses {
		if !at.Before(from) && at.Before(to) {
			return at, true
		}
	}
	return time.Time{}, false
}

// longestStall is the longest time within [from, to] that no letter was
// committed: between two readings whose counts differ, the time after the
// first of an unchanged run.
func (w *ingestWatch) longestStall(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	var lastAdvance time.Time
	prev := -1.0
	for _, p := range w.points {
		if p.at.Before(from) {
			prev, lastAdvance = p.captured, p.at
			continue
		}
		if p.at.After(to) {
			break
		}
		if lastAdvance.IsZero() {
			lastAdvance = p.at
		}
		if p.captured != prev {
			longest = max(longest, p.at.Sub(lastAdvance))
			prev, lastAdvance = p.captured, p.at
		}
	}
	return longest
}

// window returns the samples taken in [from, to).
func (w *ingestWatch) window(from, to time.Duration) []soakSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []soakSample
	for _, s := range w.samples {
		if s.at >= from && s.at < to {
			out = append(out, s)
		}
	}
	return out
}

// scrapeSamples reads every sample of a Prometheus text scrape.
func scrapeSamples(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, errors.New(resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// vmRSS is the resident set of process pid in bytes, from
// /proc/PID/status, or 0 when unreadable.
func vmRSS(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// queueDepth reads a queue's ready letters on its own connection, redialled
// after a loss; -1 while the broker is away.
type queueDepth struct {
	url, queue string
	conn       *amqp.Connection
}

func (q *queueDepth) ready() int {
	if q.conn == nil || q.conn.IsClosed() {
		conn, err := amqp.Dial(q.url)
		if err != nil {
			return -1
		}
		q.conn = conn
	}
	ch, err := q.conn.Channel()
	if err != nil {
		_ = q.conn.Close()
		return -1
	}
	defer ch.Close()
	info, err := ch.QueueDeclarePassive(q.queue, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return info.Messages
}

func (q *queueDepth) close() {
	if q.conn != nil {
		_ = q.conn.Close()
	}
}
