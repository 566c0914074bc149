package servicetest

import "testing"

// contractCase is one rule of a contract, run in a world of type W.
type contractCase[W any] struct {
	name string
	run  func(t *testing.T, w W)
}

// runCases runs each case as a parallel subtest in a world of its own.
func runCases[W any](t *testing.T, newWorld func(t *testing.T) W, cases []contractCase[W]) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newWorld(t))
		})
	}
}
