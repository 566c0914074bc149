//go:build expiryctl_noaudit

package audit

// recording is false: this binary was built for the audit-cost benchmark.
const recording = false
