package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// probe is one operation timed repeatedly.
type probe struct {
	name    string
	fn      func(context.Context) error
	samples []time.Duration
}

// measureInterleaved runs every probe warmup times, then runs times, in
// rounds: each round calls every probe once, starting with a different probe
// each round. Interleaving spreads whatever else the machine is doing (a
// checkpoint, autovacuum, the other engineers' tests) over baseline and
// subject alike, so that it does not land on one of them and bend the ratio.
func measureInterleaved(ctx context.Context, warmup, runs int, probes ...*probe) error {
	for range warmup {
		for _, p := range probes {
			if err := p.fn(ctx); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	for round := range runs {
		for i := range probes {
			p := probes[(round+i)%len(probes)]
			start := time.Now()
			if err := p.fn(ctx); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			p.samples = append(p.samples, time.Since(start))
		}
	}
	return nil
}

func (p *probe) median() time.Duration { return median(p.samples) }

func median[T ~int64 | ~float64](samples []T) T {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
