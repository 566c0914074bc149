package sqsqueue

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// QueueRef names an SQS queue as a user gives it: sqs://NAME, a queue in
// the configured account and region (AWS_REGION, AWS_ENDPOINT_URL_SQS and
// the usual AWS configuration), or the queue's URL, whose host names its
// region (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME) or, for an
// SQS-compatible server, the endpoint itself (http://HOST:PORT/ACCOUNT/NAME).
type QueueRef struct {
	Name string
	// URL is the queue URL given; empty for sqs://NAME, whose URL SQS
	// is asked for.
	URL string
	// Region is the region the URL's host names; empty otherwise.
	Region string
	// Endpoint is the server of a URL whose host is not Amazon's.
	Endpoint string
	// Account is the account an ARN names, whose queue of that name it
	// is; empty otherwise.
	Account string
}

// queueName is what SQS allows in a queue name: up to 80 letters, digits,
// hyphens and underscores, and a FIFO queue's ".fifo".
var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,75}(\.fifo)?$|^[A-Za-z0-9_-]{1,80}$`)

// amazonHost is an SQS endpoint of AWS: sqs.REGION.amazonaws.com, and the
// legacy REGION.queue.amazonaws.com.
var amazonHost = regexp.MustCompile(`^(?:sqs\.([a-z0-9-]+)|([a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?$`)

// IsQueueRef says whether s names an SQS queue rather than a RabbitMQ
// one: it begins with sqs://, http:// or https://, or is an SQS queue's
// ARN, as letters name the queues they were captured from.
func IsQueueRef(s string) bool {
	for _, p := range []string{"sqs://", "http://", "https://", "arn:aws:sqs:"} {
		if strings.HasPrefix(strings.ToLower(s), p) {
			return true
		}
	}
	return false
}

// ParseQueueRef reads s, or says what an SQS queue reference looks like.
func ParseQueueRef(s string) (QueueRef, error) {
	const forms = "name an SQS queue as sqs://NAME or by its URL, e.g. https://sqs.us-east-1.amazonaws.com/123456789012/reservation-expiry-dlq"
	if strings.HasPrefix(s, "arn:aws:sqs:") {
		region, account, name, ok := arnParts(s)
		if !ok || !queueName.MatchString(name) || region == "" || account == "" {
			return QueueRef{}, fmt.Errorf("invalid SQS queue ARN %q: want arn:aws:sqs:REGION:ACCOUNT:NAME", s)
		}
		return QueueRef{Name: name, Region: region, Account: account}, nil
	}
	if len(s) >= 6 && strings.EqualFold(s[:6], "sqs://") {
		name := s[6:]
		if !queueName.MatchString(name) {
			return QueueRef{}, fmt.Errorf("invalid SQS queue %q: a queue name is 1 to 80 letters, digits, '-' or '_' (a FIFO queue's ending in .fifo); %s", s, forms)
		}
		return QueueRef{Name: name}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return QueueRef{}, fmt.Errorf("invalid SQS queue %q: %s", s, forms)
	}
	if u.User != nil {
		return QueueRef{}, fmt.Errorf("invalid SQS queue %q: a queue URL carries no credentials, SQS takes them from the AWS configuration (AWS_PROFILE, AWS_ACCESS_KEY_ID, …)", u.Redacted())
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) != 2 || parts[0] == "" || !queueName.MatchString(parts[1]) {
			return QueueRef{}, fmt.Errorf("invalid SQS queue URL %q: want …/ACCOUNT/NAME; %s", s, forms)
		}
		ref := QueueRef{Name: parts[1], URL: s}
		if m := amazonHost.FindStringSubmatch(strings.ToLower(u.Hostname())); m != nil {
			ref.Region = m[1] + m[2]
		} else {
			ref.Endpoint = u.Scheme + "://" + u.Host
		}
		return ref, nil
	}
	return QueueRef{}, fmt.Errorf("invalid SQS queue %q: %s", s, forms)
}

// ARN is the queue's ARN from its region, account and name.
func ARN(region, account, name string) string {
	return "arn:aws:sqs:" + region + ":" + account + ":" + name
}

// arnParts reads an SQS queue ARN.
func arnParts(arn string) (region, account, name string, ok bool) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" {
		return "", "", "", false
	}
	return p[3], p[4], p[5], true
}
