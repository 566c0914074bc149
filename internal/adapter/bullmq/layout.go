package bullmq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The meta version prefixes of the BullMQ releases whose key layouts the
// driver reads and writes. The keys a failed job and its retry touch
// (failed, wait, prioritized, pc, marker, events, meta, active and the job
// hash with atm) are the same in both, but for a paused queue: BullMQ 5
// keeps its waiting jobs in a list of their own (paused) and adds there,
// while BullMQ 6 leaves them in wait, marks only meta, and has its workers
// never read the paused list (a resume moves what a 5 left there back to
// wait). retry.lua is given both and puts a job where the queue's own
// release looks for it.
const (
	version5 = "bullmq:5."
	version6 = "bullmq:6."
)

// SupportedVersion names the BullMQ releases whose key layouts this driver
// reads and writes, as a queue's meta hash names them in its version field
// ("bullmq:5.81.5", "bullmq:6.7.6"): BullMQ 5 and 6. Refused are BullMQ 4
// and older (no marker key, so an idle 4 worker would not wake for a
// retried job), a later major whose layout nobody has read yet, and BullMQ
// Pro, whose meta says bullmq-pro.
const SupportedVersion = version5 + "* and " + version6 + "*"

// TestedVersion5 and TestedVersion6 are the releases of BullMQ 5 and 6 the
// driver's tests run, each with its own Worker (e2e/node/package.json's
// bullmq and its alias bullmq6).
const (
	TestedVersion5 = "bullmq:5.81.5"
	TestedVersion6 = "bullmq:6.7.6"
)

// TestedVersions are TestedVersion5 and TestedVersion6, oldest first.
var TestedVersions = []string{TestedVersion5, TestedVersion6}

// TestedVersion is the newest tested release, the one `npm install bullmq`
// installs: the version a queue seeded without BullMQ names where the two
// layouts do not differ (the benchmarks).
const TestedVersion = TestedVersion6

// UnsupportedVersionError is a queue whose meta names a BullMQ version
// whose key layout the driver does not know, or none.
type UnsupportedVersionError struct {
	Queue   string
	Version string
}

func (e *UnsupportedVersionError) Error() string {
	supported := fmt.Sprintf("expiryctl reads and retries BullMQ 5 and 6 queues (meta version %s; tested with %s and %s)", SupportedVersion, TestedVersion5, TestedVersion6)
	switch {
	case e.Version == "":
		return fmt.Sprintf("BullMQ queue %s has no version in its meta hash: its meta was deleted, or something other than a BullMQ Queue wrote it; %s", e.Queue, supported)
	case strings.HasPrefix(e.Version, "bullmq-pro:"):
		return fmt.Sprintf("BullMQ queue %s was written by BullMQ Pro (%s), whose key layout expiryctl does not know: %s", e.Queue, e.Version, supported)
	}
	return fmt.Sprintf("BullMQ queue %s was written by %s, whose key layout expiryctl does not know: %s", e.Queue, e.Version, supported)
}

// major is the BullMQ major version that version, meta's version field,
// names when the driver knows its layout: 5 or 6, else 0.
func major(version string) int {
	for _, v := range []struct {
		prefix string
		major  int
	}{{version5, 5}, {version6, 6}} {
		rest, ok := strings.CutPrefix(version, v.prefix)
		if !ok {
			continue
		}
		// As retry.lua reads it: the prefix, then a number.
		minor, _, _ := strings.Cut(rest, ".")
		if minor != "" && strings.Trim(minor, "0123456789") == "" {
			return v.major
		}
	}
	return 0
}

// supported says whether version, meta's version field, names a layout
// the driver knows.
func supported(version string) bool { return major(version) != 0 }

// keys are a queue's Redis keys, as BullMQ's QueueKeys makes them.
type keys struct {
	base string // PREFIX:QUEUE:
}

func keysOf(r Ref) keys { return keys{base: r.Prefix + ":" + r.Queue + ":"} }

func (k keys) job(id string) string  { return k.base + id }
func (k keys) of(name string) string { return k.base + name }

// Version reads the BullMQ version that last opened the queue (meta's
// version field). A queue with no meta hash is a *QueueNotFoundError,
// which says under which prefix Redis holds a queue of that name, if any;
// a version whose layout the driver does not know, an
// *UnsupportedVersionError.
func Version(ctx context.Context, client redis.UniversalClient, r Ref) (string, error) {
	meta := keysOf(r).of("meta")
	pipe := client.Pipeline()
	version := pipe.HGet(ctx, meta, "version")
	exists := pipe.Exists(ctx, meta)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read the BullMQ version of %s: %w", r.Name(), err)
	}
	if exists.Val() == 0 {
		return "", notFound(ctx, client, r)
	}
	v := version.Val()
	if !supported(v) {
		return v, &UnsupportedVersionError{Queue: r.Name(), Version: v}
	}
	return v, nil
}
