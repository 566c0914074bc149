//go:build !expiryctl_noaudit

package audit

// recording is false only in binaries built with the expiryctl_noaudit tag,
// which the benchmark builds to measure what auditing costs. No flag or
// setting of a shipped binary turns auditing off.
const recording = true
