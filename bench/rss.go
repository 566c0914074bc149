package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// procRun is what one measured run of the built binary did.
type procRun struct {
	Wall time.Duration
	// PeakRSS is the highest VmHWM sampled from /proc while the process
	// ran, in bytes.
	PeakRSS int64
	// CPU is the user and system time the process used.
	CPU    time.Duration
	Stdout []byte
	Stderr string
}

// runBinary runs bin with args and extra environment, discarding stdout
// unless keepStdout, and measures wall time and peak resident memory. A
// non-zero exit is an error that quotes the command's stderr.
func runBinary(ctx context.Context, bin string, args, env []string, keepStdout bool) (procRun, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	if keepStdout {
		cmd.Stdout = &stdout
	} // else nil: the child writes to /dev/null
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return procRun{}, fmt.Errorf("start %s: %w (build it with `make build`, or set EXPIRYCTL_BIN)", bin, err)
	}
	done := make(chan struct{})
	hwm := make(chan int64, 1)
	go func() {
		// VmHWM is the high-water mark of the process's own memory since
		// its exec, so sampling it often enough only risks missing a peak
		// reached in the last few milliseconds. rusage's maxrss cannot be
		// used: Go starts children with vfork, and at exec the kernel
		// carries the shared parent's high-water mark into the child's
		// maxrss, so every child would report at least the benchmark's own
		// peak.
		var peak int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := readVmHWM(cmd.Process.Pid); v > peak {
				peak = v
			}
			select {
			case <-done:
				hwm <- peak
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	run := procRun{Wall: wall, PeakRSS: <-hwm, Stdout: stdout.Bytes(), Stderr: stderr.String()}
	run.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if run.PeakRSS == 0 && err == nil {
		return run, fmt.Errorf("%s %s: could not read its memory use from /proc", bin, strings.Join(args, " "))
	}
	if err != nil {
		return run, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, strings.TrimSpace(run.Stderr))
	}
	return run, nil
}

// readVmHWM returns the process's peak resident set size so far, in bytes,
// or 0 once it has exited.
func readVmHWM(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
