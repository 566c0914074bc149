package commands

import (
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// ManagementURLs resolves --management-url (repeated or comma-separated),
// then EXPIRYCTL_MANAGEMENT_URL (comma-separated), then the management API
// of each node of AMQPURLs (broker.ManagementURLFor): one URL per node of
// a cluster, read in turn while one does not answer, so that a node down
// leaves the live queues, the handler check and the pacing to another.
// A URL that cannot be derived (an unreadable AMQP URL) is left out.
func (f *Factory) ManagementURLs() []string {
	if urls := broker.SplitURLs(firstNonEmpty(f.ManagementURLFlag, f.Getenv("EXPIRYCTL_MANAGEMENT_URL"))); len(urls) > 0 {
		return urls
	}
	if c, err := f.RabbitMQConnection(); err == nil && len(c.ManagementURLs) > 0 {
		return c.ManagementURLs
	}
	var urls []string
	for _, amqpURL := range f.AMQPURLs() {
		if u, err := broker.ManagementURLFor(amqpURL); err == nil {
			urls = append(urls, u)
		}
	}
	return urls
}

// ManagementURL is the first of ManagementURLs, "" when there is none.
func (f *Factory) ManagementURL() string {
	if urls := f.ManagementURLs(); len(urls) > 0 {
		return urls[0]
	}
	return ""
}

// management is the reader of the management API of every node, in the
// order of ManagementURLs. Each URL goes with the AMQP URL of the same
// place in the list (the first when the lists differ in length), whose
// vhost it reads and whose credentials it falls back on.
func (f *Factory) management() *broker.ManagementNodes {
	amqpURLs := f.AMQPURLs()
	mgmt := f.ManagementURLs()
	if len(mgmt) == 0 {
		// The AMQP URL cannot be read: the reader says so in each report.
		return broker.NewManagementNodes([]broker.ManagementConfig{{AMQPURL: amqpURLs[0], Now: f.Now}})
	}
	cfgs := make([]broker.ManagementConfig, len(mgmt))
	for i, u := range mgmt {
		amqpURL := amqpURLs[0]
		if len(mgmt) == len(amqpURLs) {
			amqpURL = amqpURLs[i]
		}
		cfgs[i] = broker.ManagementConfig{URL: u, AMQPURL: amqpURL, Now: f.Now}
	}
	return broker.NewManagementNodes(cfgs)
}
