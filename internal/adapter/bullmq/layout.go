package bullmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SupportedVersion is the BullMQ major version whose key layout this
// driver reads and writes, as the queue's meta hash names it in its
// version field ("bullmq:5.81.5"). Within BullMQ 5 the keys a failed job
// and its retry touch (failed, wait, paused, prioritized, pc, marker,
// events, meta and the job hash with atm) are the same; the driver is
// tested against TestedVersion. BullMQ 6 dropped the paused list (a paused
// queue keeps its jobs in wait): a retry written for 5 would strand jobs
// in a list 6 never reads, so 6 is refused, as is BullMQ 4 and older (no
// marker key, so an idle 4 worker would not wake for a retried job), and
// BullMQ Pro, whose meta says bullmq-pro.
const SupportedVersion = "bullmq:5."

// TestedVersion is the BullMQ release the driver's tests run against
// (e2e/node/package.json).
const TestedVersion = "bullmq:5.81.5"

// UnsupportedVersionError is a queue whose meta names a BullMQ version
// whose key layout the driver does not know, or none.
type UnsupportedVersionError struct {
	Queue   string
	Version string
}

func (e *UnsupportedVersionError) Error() string {
	if e.Version == "" {
		return fmt.Sprintf("BullMQ queue %s has no version in its meta hash: either no BullMQ Queue has opened it (nothing to capture), or it was written by something other than BullMQ; expiryctl reads BullMQ 5 queues (meta version %s*)", e.Queue, SupportedVersion)
	}
	return fmt.Sprintf("BullMQ queue %s was written by %s, whose key layout expiryctl does not know: it reads and retries BullMQ 5 queues (meta version %s*, tested with %s)", e.Queue, e.Version, SupportedVersion, TestedVersion)
}

// supported says whether version, meta's version field, is BullMQ 5's.
func supported(version string) bool {
	rest, ok := strings.CutPrefix(version, SupportedVersion)
	if !ok {
		return false
	}
	minor, _, _ := strings.Cut(rest, ".")
	_, err := strconv.Atoi(minor)
	return err == nil
}

// keys are a queue's Redis keys, as BullMQ's QueueKeys makes them.
type keys struct {
	base string // PREFIX:QUEUE:
}

func keysOf(r Ref) keys { return keys{base: r.Prefix + ":" + r.Queue + ":"} }

func (k keys) job(id string) string  { return k.base + id }
func (k keys) of(name string) string { return k.base + name }

// Version reads the BullMQ version that last opened the queue (meta's
// version field) and refuses one whose layout the driver does not know
// with an *UnsupportedVersionError.
func Version(ctx context.Context, client redis.UniversalClient, r Ref) (string, error) {
	v, err := client.HGet(ctx, keysOf(r).of("meta"), "version").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read the BullMQ version of %s: %w", r.Name(), err)
	}
	if !supported(v) {
		return v, &UnsupportedVersionError{Queue: r.Name(), Version: v}
	}
	return v, nil
}
