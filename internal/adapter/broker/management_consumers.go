package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/expiryctl/expiryctl/replay"
)

// The management is a replay.Consumers: the runner's handler check reads
// through it which queues a replay's targets route to and which handler
// versions their consumers run.
var _ replay.Consumers = (*Management)(nil)

// HandlerVersionProperty is the AMQP connection property in which a
// consumer advertises its handler version (docs/message-contract.md).
const HandlerVersionProperty = "handler-version"

// Bounds on what one TargetConsumers reads: a cohort has a handful of
// targets, each bound to a queue or two, consumed by a few workers.
const (
	maxTargetQueues      = 20
	maxConsumerConnLooks = 100
	maxExchangeHops      = 3
	maxObjectBody        = 4 << 20
)

// TargetConsumers resolves each target to the queues it routes to and
// returns each queue once, in the order first reached, with its consumers
// and the handler version each one's connection advertises. The default
// exchange routes to the queue its routing key names; another exchange to
// the queues of its bindings that match the key (direct: equal, topic: the
// pattern, fanout and any other type: every binding, since the message's
// headers are not known here), following exchange-to-exchange bindings up
// to three hops. A queue, exchange or connection that does not exist adds
// nothing. The management plugin refreshes consumers with its statistics
// (every 5 s by default), so a consumer that just came or went may be
// reported late. An API that cannot be used or reached is an error saying
// why, scrubbed of passwords.
func (m *Management) TargetConsumers(ctx context.Context, targets []replay.Target) ([]replay.QueueConsumers, error) {
	if m.unusable != "" {
		return nil, errors.New(m.redact(m.unusable))
	}
	var queues []string
	for _, t := range targets {
		routed, err := m.routedQueues(ctx, t.Exchange, t.RoutingKey, 0)
		if err != nil {
			return nil, err
		}
		for _, q := range routed {
			if !slices.Contains(queues, q) && len(queues) < maxTargetQueues {
				queues = append(queues, q)
			}
		}
	}
	versions := map[string]*string{} // connection name -> its version; nil: gone
	out := []replay.QueueConsumers{}
	for _, q := range queues {
		var queue struct {
			Consumers []struct {
				Tag string `json:"consumer_tag"`
				// Channel is an object, or [] for a consumer whose
				// channel has just closed.
				Channel json.RawMessage `json:"channel_details"`
			} `json:"consumer_details"`
		}
		found, err := m.getObject(ctx, []string{"api", "queues", m.vhost, q}, url.Values{"columns": {"name,consumer_details"}}, &queue)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		qc := replay.QueueConsumers{Queue: q, Consumers: []replay.Consumer{}}
		for _, c := range queue.Consumers {
			var channel struct {
				Connection string `json:"connection_name"`
			}
			if json.Unmarshal(c.Channel, &channel) != nil || channel.Connection == "" {
				continue // its channel closed: it consumes no more
			}
			v, err := m.connectionVersion(ctx, channel.Connection, versions)
			if err != nil {
				return nil, err
			}
			if v == nil {
				continue // its connection closed since the queue was read
			}
			qc.Consumers = append(qc.Consumers, replay.Consumer{Tag: c.Tag, Connection: channel.Connection, HandlerVersion: *v})
		}
		out = append(out, qc)
	}
	return out, nil
}

// connectionVersion is the handler version connection advertises ("" for
// none), read once per call (seen); nil when the connection is gone.
func (m *Management) connectionVersion(ctx context.Context, connection string, seen map[string]*string) (*string, error) {
	if v, ok := seen[connection]; ok {
		return v, nil
	}
	if len(seen) >= maxConsumerConnLooks {
		// Past the bound the consumer counts, without a version: it proves
		// no new handler, which is the safe side.
		return new(""), nil
	}
	var conn struct {
		ClientProperties map[string]any `json:"client_properties"`
	}
	found, err := m.getObject(ctx, []string{"api", "connections", connection}, url.Values{"columns": {"client_properties"}}, &conn)
	if err != nil {
		return nil, err
	}
	if !found {
		seen[connection] = nil
		return nil, nil
	}
	v, _ := conn.ClientProperties[HandlerVersionProperty].(string)
	seen[connection] = &v
	return &v, nil
}

// apiBinding is a binding as /api/exchanges/{vhost}/{name}/bindings/source
// lists it.
type apiBinding struct {
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// routedQueues is where exchange sends a message with routing key key.
func (m *Management) routedQueues(ctx context.Context, exchange, key string, hops int) ([]string, error) {
	if exchange == "" {
		return []string{key}, nil
	}
	var x struct {
		Type string `json:"type"`
	}
	found, err := m.getObject(ctx, []string{"api", "exchanges", m.vhost, exchange}, url.Values{"columns": {"name,type"}}, &x)
	if err != nil || !found {
		return nil, err
	}
	var bindings []apiBinding
	if _, err := m.getObject(ctx, []string{"api", "exchanges", m.vhost, exchange, "bindings", "source"}, nil, &bindings); err != nil {
		return nil, err
	}
	var queues []string
	for _, b := range bindings {
		if !bindingMatches(x.Type, b.RoutingKey, key) {
			continue
		}
		switch {
		case b.DestinationType == "queue":
			queues = append(queues, b.Destination)
		case b.DestinationType == "exchange" && hops < maxExchangeHops:
			more, err := m.routedQueues(ctx, b.Destination, key, hops+1)
			if err != nil {
				return nil, err
			}
			queues = append(queues, more...)
		}
	}
	return queues, nil
}

// bindingMatches reports whether a binding with binding key pattern of an
// exchange of type kind takes a message with routing key key.
func bindingMatches(kind, pattern, key string) bool {
	switch kind {
	case "direct":
		return pattern == key
	case "topic":
		return topicMatches(strings.Split(pattern, "."), strings.Split(key, "."))
	}
	return true
}

// topicMatches matches AMQP topic words: "*" is one word, "#" zero or
// more. It fills a table of which pattern suffixes match which key
// suffixes, so that a pattern of many "#"s costs its length times the
// key's, not exponential time: the routing key is a producer's.
func topicMatches(pattern, key []string) bool {
	// next[j] is whether pattern[i+1:] matches key[j:]; cur is for pattern[i:].
	next := make([]bool, len(key)+1)
	next[len(key)] = true
	for i := len(pattern) - 1; i >= 0; i-- {
		cur := make([]bool, len(key)+1)
		for j := len(key); j >= 0; j-- {
			switch {
			case pattern[i] == "#":
				cur[j] = next[j] || (j < len(key) && cur[j+1])
			case j < len(key) && (pattern[i] == "*" || pattern[i] == key[j]):
				cur[j] = next[j+1]
			}
		}
		next = cur
	}
	return next[0]
}

// getObject reads one object of the API at the path of segments (each
// escaped) into v; found is false on a 404. Any other failure is an error
// saying why, scrubbed of passwords.
func (m *Management) getObject(ctx context.Context, segments []string, query url.Values, v any) (found bool, err error) {
	reqURL := *m.endpoint
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	reqURL.RawPath = reqURL.EscapedPath() + strings.Join(escaped, "/")
	reqURL.Path += strings.Join(segments, "/")
	reqURL.RawQuery = query.Encode()

	readCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(readCtx, http.MethodGet, reqURL.String(), nil)
	if err != nil {
		return false, errors.New(m.redact(fmt.Sprintf("invalid management URL %s: %v", m.shown, err)))
	}
	req.SetBasicAuth(m.user, m.password)
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, errors.New(m.redact(m.unreachable(err)))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		// A missing queue, exchange or connection; a missing vhost too,
		// which the queue reads of Topology say more about.
		return false, nil
	default:
		return false, errors.New(m.redact(m.refused(resp)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxObjectBody)).Decode(v); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, errors.New(m.redact(fmt.Sprintf("RabbitMQ's management API at %s sent %s expiryctl cannot read (%v): is the URL that of the management plugin?",
			m.shown, segments[1], err)))
	}
	return true, nil
}
