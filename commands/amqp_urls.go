package commands

import (
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
)

// AMQPURLs resolves --amqp-url, then EXPIRYCTL_AMQP_URL, then the
// context's RabbitMQ connection, then the default, into the URLs of the
// broker's nodes: one for a single broker, several for a cluster, which
// AMQP dials in order and fails over between. A configuration that cannot
// be used leaves the flag, the environment and the default: AMQP refuses
// it before it dials.
func (f *Factory) AMQPURLs() []string {
	if c, err := f.RabbitMQConnection(); err == nil && len(c.URLs) > 0 {
		return c.URLs
	}
	urls := broker.SplitURLs(firstNonEmpty(f.AMQPURLFlag, f.Getenv("EXPIRYCTL_AMQP_URL")))
	if len(urls) == 0 {
		return []string{broker.DefaultURL}
	}
	return urls
}

// urlList is a flag given once with a comma-separated list, or repeated:
// each use adds its URLs to the list in target.
type urlList struct {
	target *string
	set    bool
}

func (u *urlList) Set(value string) error {
	if u.set && *u.target != "" {
		value = *u.target + "," + value
	}
	*u.target, u.set = value, true
	return nil
}

// String is empty: pflag prints it as the default, and a URL given on the
// command line may carry a password.
func (u *urlList) String() string { return "" }

func (u *urlList) Type() string { return "urls" }
