package broker

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/expiryctl/expiryctl/config"
)

// ConfigRules are what a RabbitMQ connection takes in the configuration
// file: its nodes' amqp:// URLs (url, or urls for a cluster's nodes in
// the order they are tried), each naming its login, and the management
// API of each node (management-url(s); by default each node's host on
// port 15672 with the same login).
var ConfigRules = config.Rules{System: "rabbitmq", Keys: []string{"url", "management-url"}, Check: func(c config.Connection) error {
	if err := config.CheckURL(c, []string{"amqp", "amqps"}, true); err != nil {
		return err
	}
	for _, raw := range c.ManagementURLs {
		u, err := url.Parse(raw)
		if err != nil || (strings.ToLower(u.Scheme) != "http" && strings.ToLower(u.Scheme) != "https") || u.Host == "" {
			return fmt.Errorf("management-url %q is not an http:// or https:// URL with a host", u.Redacted())
		}
	}
	return nil
}}
