package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times; 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuSnapshot is the CPU time, in ticks, that the processes a benchmark
// involves had used at one moment, and the whole machine's busy time.
type cpuSnapshot struct {
	machine int64
	procs   map[int]procTicks
}

type procTicks struct {
	group string
	ticks int64
}

// cpuUse is where the CPU went between two snapshots, in seconds.
type cpuUse struct {
	Groups  map[string]float64
	Machine float64
}

// takeCPU reads /proc for the benchmark process, RabbitMQ's Erlang VM and
// every PostgreSQL process. Other processes count only in the machine
// total, so that "other" shows load the benchmark did not cause (the
// other engineers' tests on a shared machine).
func takeCPU() cpuSnapshot {
	s := cpuSnapshot{procs: map[int]procTicks{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		f := strings.Fields(string(line))
		// cpu user nice system idle iowait irq softirq steal ...
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i != 3 && i != 4 && i < 8 {
				s.machine += n
			}
		}
	}
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ticks, ok := readProcStat(pid)
		if !ok {
			continue
		}
		var group string
		switch {
		case pid == self:
			group = "bench"
		case comm == "postgres":
			group = "postgres"
		case comm == "beam.smp" && isRabbitServer(pid):
			group = "rabbitmq"
		case comm == "expiryctl":
			group = "expiryctl"
		default:
			continue
		}
		s.procs[pid] = procTicks{group, ticks}
	}
	return s
}

// since returns the CPU used from start to s. A process that exited in
// between is lost; one that started in between counts whole.
func (s cpuSnapshot) since(start cpuSnapshot) cpuUse {
	u := cpuUse{Groups: map[string]float64{}, Machine: float64(s.machine-start.machine) / clockTicks}
	for pid, p := range s.procs {
		d := p.ticks
		if old, ok := start.procs[pid]; ok && old.group == p.group {
			d -= old.ticks
		}
		u.Groups[p.group] += float64(d) / clockTicks
	}
	return u
}

func (u cpuUse) String() string {
	var parts []string
	var known float64
	for _, g := range []string{"rabbitmq", "postgres", "bench", "expiryctl"} {
		if v, ok := u.Groups[g]; ok && v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1fs", g, v))
			known += v
		}
	}
	parts = append(parts, fmt.Sprintf("other %.1fs", max(u.Machine-known, 0)))
	return "CPU " + strings.Join(parts, ", ")
}

// readProcStat returns a process's command name and utime+stime.
func readProcStat(pid int) (string, int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return "", 0, false
	}
	comm := string(b[open+1 : close])
	f := strings.Fields(string(b[close+1:]))
	// After the comm: state(0) ... utime is field 14 of stat, index 11 here.
	if len(f) < 13 {
		return "", 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return comm, ut + st, true
}

// isRabbitServer tells the broker's VM from rabbitmqctl's, which is also a
// beam.smp.
func isRabbitServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte("rabbit\x00boot"))
}
