package sqsqueue

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/expiryctl/expiryctl/config"
)

var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// ConfigRules are what an SQS connection takes in the configuration file:
// its region, an endpoint for an SQS-compatible server (by default AWS's
// own for the region), and the AWS shared configuration's profile its
// credentials come from (by default the AWS configuration's usual
// chain). Its secret is the profile's; it takes no password.
var ConfigRules = config.Rules{System: "sqs", Keys: []string{"region", "endpoint", "profile"}, Check: func(c config.Connection) error {
	if c.Password.Set() {
		return fmt.Errorf("an SQS connection's credentials come from its profile: (the AWS shared configuration), not a password")
	}
	if c.Region != "" && !regionPattern.MatchString(c.Region) {
		return fmt.Errorf("region %q is not an AWS region's name (e.g. eu-west-1)", c.Region)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("endpoint %q is not an http:// or https:// URL with a host and no login", c.Endpoint)
		}
	}
	return nil
}}
