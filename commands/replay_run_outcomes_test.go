package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/internal/fixture/fakes"
	"github.com/expiryctl/expiryctl/internal/fixture/pgtest"
	"github.com/expiryctl/expiryctl/internal/service"
	"github.com/expiryctl/expiryctl/replay"
)

func TestReplayRunShowsOutcomes(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, runner *fakes.Runner, tty bool, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := testFactory(t)
		f.IO.StdoutTTY, f.IO.StderrTTY = tty, tty
		err := runCmd(NewCmdReplayRun(f, func(ctx context.Context, o *ReplayRunOptions) error {
			o.Runner = serve[service.Runner](runner)
			return replayRunRun(ctx, o)
		}), args...)
		return out.String(), errOut.String(), err
	}
	stats := &replay.OutcomeStats{Watched: 10, Terminal: 9, Late: 1, Unsettled: 1, Conflicts: 2,
		LatencyP50: 120 * time.Millisecond, LatencyP99: 1430 * time.Millisecond}

	t.Run("the progress line carries latency and conflicts", func(t *testing.T) {
		t.Parallel()
		runner := &fakes.Runner{Result: replay.RunResult{RequestID: 7, Kind: replay.KindReplay, Status: replay.StatusCompleted}, Steps: []replay.Progress{
			{RequestID: 7, Kind: replay.KindReplay, Phase: "replay", Total: 10, Done: 10, Confirmed: 10, Rate: 5, Outcomes: stats},
			{RequestID: 7, Kind: replay.KindReplay, Phase: "settling", Total: 10, Done: 10, Confirmed: 10, Rate: 5, Outcomes: stats},
		}}
		_, errOut, err := run(t, runner, true, "7")
		if err != nil {
			t.Fatal(err)
		}
		want := "10/10 done (10 confirmed, 0 skipped, 0 failed), 0 in flight, 5.0/s; outcomes 9/10 terminal, p50 120ms p99 1.4s, 2 conflicts, 1 unsettled"
		if !strings.Contains(errOut, "replay 7: "+want+"\r") ||
			!strings.Contains(errOut, "replay 7: all published, waiting for the last reservations to reach their terminal state · "+want) {
			t.Fatalf("stderr %q, want lines with %q", errOut, want)
		}
	})
	t.Run("the result says the outcomes, and json carries them in seconds", func(t *testing.T) {
		t.Parallel()
		res := replay.RunResult{RequestID: 7, Kind: replay.KindReplay, Status: replay.StatusHalted, Outcomes: stats,
			HaltCondition: replay.ConditionUnsettledRatio}
		_, errOut, err := run(t, &fakes.Runner{Result: res, Err: &replay.HaltError{RequestID: 7, Condition: replay.ConditionUnsettledRatio, Reason: "1 of 10"}}, false, "7")
		wantExit(t, err, ExitHalted)
		if !strings.Contains(errOut, "replay request 7: outcomes 9/10 terminal, p50 120ms p99 1.4s, 2 conflicts, 1 unsettled\n") {
			t.Fatalf("stderr %q", errOut)
		}
		out, _, _ := run(t, &fakes.Runner{Result: res}, false, "7", "-o", "json")
		var got struct {
			Outcomes map[string]float64 `json:"outcomes"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Outcomes["conflicts"] != 2 || got.Outcomes["latency_p99_seconds"] != 1.43 {
			t.Fatalf("json outcomes %v (%v):\n%s", got.Outcomes, err, out)
		}
	})
}

func TestReplayRunOutcomeURL(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-outcome"
	cases := []struct {
		name, flag, env, want string
	}{
		{name: "neither: expiryctl's database", want: ""},
		{name: "environment", env: "postgres://ro:" + secret + "@db/res", want: "postgres://ro:" + secret + "@db/res"},
		{name: "flag over environment", flag: "postgres://flag@db/res", env: "postgres://env@db/res", want: "postgres://flag@db/res"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, _, _ := testFactory(t)
			f.Getenv = func(k string) string {
				if k == "EXPIRYCTL_OUTCOME_URL" {
					return c.env
				}
				return ""
			}
			args := []string{"7"}
			if c.flag != "" {
				args = append(args, "--outcome-url", c.flag)
			}
			if err := runCmd(NewCmdReplayRun(f, func(context.Context, *ReplayRunOptions) error { return nil }), args...); err != nil {
				t.Fatal(err)
			}
			if got := f.OutcomeURL(); got != c.want {
				t.Errorf("OutcomeURL() = %q, want %q", got, c.want)
			}
			if c.want != "" && !strings.Contains(strings.Join(f.connectionURLs(), " "), c.want) {
				t.Errorf("the outcome URL is not among the URLs whose passwords are redacted: %v", f.connectionURLs())
			}
		})
	}
	t.Run("an unreachable outcome database is named without its password", func(t *testing.T) {
		t.Parallel()
		f, _, _ := testFactory(t)
		f.OutcomeURLFlag = "postgres://ro:" + secret + "@127.0.0.1:1/res?connect_timeout=1"
		_, err := f.Outcomes(context.Background())
		if err == nil {
			t.Fatal("connecting to port 1 succeeded")
		}
		if !strings.Contains(err.Error(), "reservation database") || strings.Contains(err.Error(), "--database-url") || strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q: want the reservation database and --outcome-url named, and no password", err)
		}
	})
	t.Run("a failed connect is tried again on the next call", func(t *testing.T) {
		t.Parallel()
		// metrics serve and the terminal UI ask on every refresh: a
		// reservation database down when they started must be read once
		// it is back. The URL changes here to stand for the database
		// coming back; e2e's TestHoldsAtSourceThroughAnOutage does it
		// with the network.
		f, _, _ := testFactory(t)
		f.OutcomeURLFlag = "postgres://ro:" + secret + "@127.0.0.1:1/res?connect_timeout=1"
		if _, err := f.Outcomes(context.Background()); err == nil {
			t.Fatal("connecting to port 1 succeeded")
		}
		f.OutcomeURLFlag = pgtest.AdminURL()
		pool, err := f.Outcomes(context.Background())
		if err != nil || pool == nil {
			t.Fatalf("the second connect: pool %v, error %v; want the pool the first failure did not stand in for", pool, err)
		}
		t.Cleanup(f.Close)
		if again, _ := f.Outcomes(context.Background()); again != pool {
			t.Error("a third call opened another pool: the connected one is kept")
		}
	})
}
