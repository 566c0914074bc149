// Command expiryctl-bench measures expiryctl's capture, triage, replay and
// audit paths as ratios to baselines measured in the same run; see
// bench for the scenarios and targets.
//
//	go run ./cmd/expiryctl-bench -quick
//	make bench BENCH_ARGS='-only list,summary'
package main

import (
	"os"

	"github.com/expiryctl/expiryctl/bench"
)

func main() {
	os.Exit(bench.Main(os.Args[1:], os.Stdout))
}
