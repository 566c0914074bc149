package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/dsn"
)

// DefaultManagementTimeout bounds one read of the management API: the
// live queues are one signal among several, and a broker that does not
// answer within it must not hold up the rest of a summary or a scrape.
const DefaultManagementTimeout = 3 * time.Second

// ManagementURLFor returns the URL of the management API of the broker
// that amqpURL names: the same host and credentials (amqp091's guest/guest
// when amqpURL has none), over http on port 15672, or over https on port
// 15671 for amqps, the management plugin's default listeners. A user who
// set only the AMQP URL thus needs nothing more. The vhost stays out of it:
// the management URL is the API's base, and the vhost is the AMQP URL's.
func ManagementURLFor(amqpURL string) (string, error) {
	uri, err := amqp.ParseURI(amqpURL)
	if err != nil {
		return "", fmt.Errorf("invalid AMQP URL %s: %s", dsn.Redact(amqpURL), dsn.RedactTextFor(err.Error(), amqpURL))
	}
	scheme, port := "http", "15672"
	if uri.Scheme == "amqps" {
		scheme, port = "https", "15671"
	}
	u := url.URL{Scheme: scheme, User: url.UserPassword(uri.Username, uri.Password), Host: net.JoinHostPort(uri.Host, port), Path: "/"}
	return u.String(), nil
}

// ManagementConfig says where RabbitMQ's management API is and which
// vhost's queues to read.
type ManagementConfig struct {
	// URL is the API's base URL, credentials in its userinfo, such as
	// http://monitor:secret@rabbit:15672/ (a path prefix set with the
	// plugin's management.path_prefix goes in its path). Empty means
	// ManagementURLFor(AMQPURL). A URL without credentials uses AMQPURL's.
	URL string
	// AMQPURL is the broker's AMQP URL. Its path names the vhost whose
	// queues are read ("/" when it has none).
	AMQPURL string
	// Timeout bounds each read (DefaultManagementTimeout when zero).
	Timeout time.Duration
	// Now is the clock head ages are measured against (time.Now when nil).
	Now func() time.Time
}

// Management reads what the queues of a work queue's topology hold from
// RabbitMQ's management HTTP API. It is a service.LiveQueues, safe for
// concurrent use. The numbers are the management plugin's statistics,
// which it refreshes every collect_statistics_interval (5 s by default), so
// they lag the queues by up to that much.
type Management struct {
	// endpoint is the API's base URL without userinfo: credentials travel in
	// the Authorization header only, so no error of net/http can quote them.
	endpoint       *url.URL
	user, password string
	vhost          string
	// shown is the base URL as messages print it: without credentials.
	shown string
	// rawURLs are the URLs whose passwords every message is scrubbed of.
	rawURLs []string
	// unusable, when set, is why the configuration cannot be used; every
	// report says it.
	unusable string
	client   *http.Client
	timeout  time.Duration
	now      func() time.Time
}

// NewManagement returns a reader of the management API that cfg names. It
// never fails: a URL that cannot be used is reported by every Topology in
// QueueReport.Unavailable, like an API that cannot be reached, so that a
// command shows the rest of what it knows.
func NewManagement(cfg ManagementConfig) *Management {
	m := &Management{
		timeout: cmp.Or(cfg.Timeout, DefaultManagementTimeout),
		now:     cfg.Now,
		rawURLs: []string{cfg.URL, cfg.AMQPURL},
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.client = &http.Client{Timeout: m.timeout}
	m.unusable = m.configure(cfg)
	return m
}

// configure resolves cfg into m and returns why it cannot be used, or "".
func (m *Management) configure(cfg ManagementConfig) string {
	amqpURI, err := amqp.ParseURI(cfg.AMQPURL)
	if err != nil {
		return fmt.Sprintf("invalid AMQP URL %s (%s): it names the vhost whose queues to read; fix --amqp-url / EXPIRYCTL_AMQP_URL",
			dsn.Redact(cfg.AMQPURL), err)
	}
	m.vhost = amqpURI.Vhost
	raw := cfg.URL
	if raw == "" {
		// Cannot fail: the AMQP URL just parsed.
		raw, _ = ManagementURLFor(cfg.AMQPURL)
		m.rawURLs = append(m.rawURLs, raw)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return fmt.Sprintf("invalid management URL %s (%s): fix --management-url / EXPIRYCTL_MANAGEMENT_URL", dsn.Redact(raw), err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Sprintf("invalid management URL %s: want http://user:password@host:15672/ (or https); fix --management-url / EXPIRYCTL_MANAGEMENT_URL", dsn.Redact(raw))
	}
	if u.User != nil {
		m.user = u.User.Username()
		m.password, _ = u.User.Password()
	} else {
		m.user, m.password = amqpURI.Username, amqpURI.Password
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	m.endpoint = u
	m.shown = u.String()
	return ""
}

// queueColumns are the only fields Topology asks for: a queue's full
// object carries its arguments, policy, node, memory and garbage-collection
// details, several kilobytes each on a broker with many queues.
var queueColumns = strings.Join([]string{
	"name", "type", "backing_queue_status.version", "messages_ready", "messages_unacknowledged", "consumers", "head_message_timestamp",
	"message_stats.publish_details.rate", "message_stats.deliver_get_details.rate", "message_stats.ack_details.rate",
}, ",")

// maxQueuesBody bounds what Topology reads of an answer: a page of 500
// queues with the few columns asked for takes well under a megabyte, so
// more is not the management API talking.
const maxQueuesBody = 16 << 20

// Topology returns the states of workQueue, its retry queues
// ("<workQueue>.retry.<ms>", shortest TTL first) and its dead-letter queue
// ("<workQueue>.dlq"), in that order, leaving out those that do not exist.
// An API that cannot be reached, refuses the credentials or has no such
// vhost, and a topology none of whose queues exist, give a report whose
// Unavailable says what is missing and how to fix it, and no error. The
// error is ctx's, when the caller gave up.
func (m *Management) Topology(ctx context.Context, workQueue string) (deadletter.QueueReport, error) {
	if m.unusable != "" {
		return deadletter.QueueReport{Unavailable: m.redact(m.unusable)}, nil
	}
	items, unavailable, err := m.listQueues(ctx, workQueue)
	if err != nil || unavailable != "" {
		return deadletter.QueueReport{Unavailable: m.redact(unavailable)}, err
	}
	queues := topologyStates(items, workQueue, m.now())
	if len(queues) == 0 {
		return deadletter.QueueReport{Unavailable: m.redact(fmt.Sprintf("vhost %q at %s has no queue %s, nor its retry queues (%s.retry.<ms>) or dead-letter queue (%s.dlq): check the queue's name",
			m.vhost, m.shown, workQueue, workQueue, workQueue))}, nil
	}
	// The API's queue statistics are sampled every few seconds: right
	// after a capture the DLQ still reads full.
	return deadletter.QueueReport{Queues: queues, Note: "RabbitMQ's counts, up to 5 s old"}, nil
}

// listQueues asks the API for the queues of the topology. The filter is
// the broker's: on a broker with thousands of queues only these few cross
// the wire. The management API filters by name only on a paged query, and
// the handful of queues a topology has fits in one page.
func (m *Management) listQueues(ctx context.Context, workQueue string) (items []apiQueue, unavailable string, err error) {
	reqURL := *m.endpoint
	reqURL.RawPath = reqURL.EscapedPath() + "api/queues/" + url.PathEscape(m.vhost)
	reqURL.Path += "api/queues/" + m.vhost
	reqURL.RawQuery = url.Values{
		"columns":   {queueColumns},
		"page":      {"1"},
		"page_size": {"500"},
		"name":      {"^" + regexp.QuoteMeta(workQueue) + `(\.retry\.[0-9]+|\.dlq)?$`},
		"use_regex": {"true"},
	}.Encode()

	readCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(readCtx, http.MethodGet, reqURL.String(), nil)
	if err != nil {
		return nil, fmt.Sprintf("invalid management URL %s: %v", m.shown, err), nil
	}
	req.SetBasicAuth(m.user, m.password)
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, m.unreachable(err), nil
	}
	defer resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		return nil, m.refused(resp), nil
	}
	var page struct {
		Items []apiQueue `json:"items"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxQueuesBody)).Decode(&page); err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, fmt.Sprintf("RabbitMQ's management API at %s sent queues expiryctl cannot read (%v): is the URL that of the management plugin?", m.shown, err), nil
	}
	return page.Items, "", nil
}

// unreachable says why a request got no answer.
func (m *Management) unreachable(err error) string {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// Its URL is the request's, long with the query: the base is said anyway.
		err = urlErr.Err
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Sprintf("RabbitMQ's management API at %s did not answer within %s: is the broker overloaded, or is the URL right? (--management-url / EXPIRYCTL_MANAGEMENT_URL)",
			m.shown, m.timeout)
	}
	return fmt.Sprintf("cannot reach RabbitMQ's management API at %s (%v): enable it with `rabbitmq-plugins enable rabbitmq_management` (scripts/services.sh does), "+
		"or point --management-url / EXPIRYCTL_MANAGEMENT_URL at it", m.shown, err)
}

// refused says why the API answered with something other than the queues.
func (m *Management) refused(resp *http.Response) string {
	var body struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&body)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Sprintf("RabbitMQ's management API at %s refused user %q: authentication failed (a wrong password, or a user without the management or monitoring tag, "+
			"or without access to vhost %q): set the credentials in --management-url / EXPIRYCTL_MANAGEMENT_URL", m.shown, m.user, m.vhost)
	case http.StatusNotFound:
		return fmt.Sprintf("RabbitMQ's management API at %s has no vhost %q: the vhost is the path of --amqp-url / EXPIRYCTL_AMQP_URL "+
			"(no path, or %%2F, for the default vhost \"/\"); if the vhost exists, check the management URL's path", m.shown, m.vhost)
	}
	reason := cmp.Or(body.Reason, body.Error)
	if len(reason) > 200 {
		reason = reason[:200] + "…"
	}
	if reason != "" {
		reason = ": " + strconv.Quote(reason)
	}
	return fmt.Sprintf("RabbitMQ's management API at %s answered %s%s", m.shown, resp.Status, reason)
}

// redact scrubs text of every form of the configured passwords: what a
// message quotes from net/url or the broker is not trusted to be clean.
func (m *Management) redact(text string) string {
	return dsn.RedactTextFor(text, m.rawURLs...)
}

// apiQueue is a queue as the management API lists it, with the columns
// Topology asks for. A field the broker has not sampled yet is absent.
type apiQueue struct {
	Name string `json:"name"`
	// Type is classic, quorum or stream; a classic queue's storage
	// version (1 or 2, RabbitMQ 3.10 on) is in its backing queue's status.
	Type    string `json:"type"`
	Backing struct {
		Version int `json:"version"`
	} `json:"backing_queue_status"`
	Ready     int64 `json:"messages_ready"`
	Unacked   int64 `json:"messages_unacknowledged"`
	Consumers int   `json:"consumers"`
	// HeadTimestamp is the timestamp property of the message at the head
	// of the queue, as the publisher set it (seconds by the AMQP spec).
	// RabbitMQ 3.10 reports it for classic queues only: a number when the
	// first ready message carries the AMQP timestamp property, null when it
	// has none or the queue is empty; quorum and stream queues leave it out.
	// The broker never stamps messages itself (the community plugin
	// rabbitmq_message_timestamp would), so the age is that of whatever the
	// producer meant: for the reference worker, the job's first publish in
	// the work and retry queues, its dead-lettering in the DLQ.
	HeadTimestamp json.RawMessage `json:"head_message_timestamp"`
	Stats         struct {
		Publish    apiRate `json:"publish_details"`
		DeliverGet apiRate `json:"deliver_get_details"`
		Ack        apiRate `json:"ack_details"`
	} `json:"message_stats"`
}

type apiRate struct {
	Rate *float64 `json:"rate"`
}

// topologyStates picks the topology of workQueue out of items: the work
// queue, its retry queues by TTL, its dead-letter queue.
func topologyStates(items []apiQueue, workQueue string, now time.Time) []deadletter.QueueState {
	type ranked struct {
		state deadletter.QueueState
		order int64 // 0 the work queue, a retry queue's TTL in ms, MaxInt64 the DLQ
	}
	var picked []ranked
	for _, q := range items {
		var r ranked
		switch {
		case q.Name == workQueue:
			r.state.Role = deadletter.RoleWork
		case q.Name == workQueue+".dlq":
			r.state.Role, r.order = deadletter.RoleDeadLetter, 1<<63-1
		case strings.HasPrefix(q.Name, workQueue+".retry."):
			suffix := strings.TrimPrefix(q.Name, workQueue+".retry.")
			ttl, err := strconv.ParseInt(suffix, 10, 64)
			if err != nil || ttl <= 0 || !isDigits(suffix) {
				continue
			}
			r.state.Role, r.order = deadletter.RoleRetry, ttl
		default:
			continue
		}
		r.state.Name = q.Name
		r.state.Ready, r.state.Unacked, r.state.Consumers = q.Ready, q.Unacked, q.Consumers
		if q.Type == "classic" {
			r.state.ClassicVersion = q.Backing.Version
		}
		r.state.PublishRate, r.state.DeliverRate, r.state.AckRate = q.Stats.Publish.Rate, q.Stats.DeliverGet.Rate, q.Stats.Ack.Rate
		r.state.HeadAge = headAge(q.HeadTimestamp, now)
		if len(q.HeadTimestamp) == 0 {
			r.state.HeadAge = estimatedHeadAge(q.Ready, q.Stats.Ack.Rate)
			r.state.HeadAgeEstimated = r.state.HeadAge != nil
		}
		picked = append(picked, r)
	}
	slices.SortStableFunc(picked, func(a, b ranked) int { return cmp.Compare(a.order, b.order) })
	states := make([]deadletter.QueueState, len(picked))
	for i, r := range picked {
		states[i] = r.state
	}
	return states
}

// headAge is how long ago the head message's timestamp was, or nil when
// the broker reported none.
func headAge(raw json.RawMessage, now time.Time) *time.Duration {
	var ts int64
	if len(raw) == 0 || json.Unmarshal(raw, &ts) != nil || ts <= 0 {
		return nil
	}
	at := time.Unix(ts, 0)
	// Producers that pass JavaScript's Date.now() through send milliseconds;
	// as seconds they would be thousands of years ahead.
	if ts > 100_000_000_000 {
		at = time.UnixMilli(ts)
	}
	// A producer's clock ahead of ours is not a negative wait.
	age := max(now.Sub(at), 0)
	return &age
}

// estimatedHeadAge stands in for the head's age where the broker reports
// no head timestamp at all (a quorum or stream queue, where RabbitMQ 3.10
// leaves the field out): the ready messages over the ack rate, the time a
// queue drained at that rate takes to reach its newest message, which
// Little's law makes the mean wait. Nil with nothing ready or nothing
// acked to estimate from.
func estimatedHeadAge(ready int64, ackRate *float64) *time.Duration {
	if ready <= 0 || ackRate == nil || *ackRate <= 0 {
		return nil
	}
	age := time.Duration(float64(ready) / *ackRate * float64(time.Second)).Round(time.Second)
	return &age
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
