package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
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

// takeCPU reads /proc for the benchmark process and its children, RabbitMQ's
// Erlang VM, Redis, the SQS server (when an SQS scenario found it on this
// machine, see watchSQSServer) and the PostgreSQL processes working for the
// benchmark, those on a job store's database apart. Other processes count only in the machine total, so that
// "other" shows load the benchmark did not cause (the other engineers'
// tests on a shared machine). RabbitMQ's, Redis's and goaws's shares are the
// whole server's, whoever else uses it.
func takeCPU() cpuSnapshot {
	return takeCPUCached(nil)
}

// takeCPUCached is takeCPU remembering each process's group in groups, so
// that sampling reads one small file per process (the command line is read
// once per process).
func takeCPUCached(groups map[int]string) cpuSnapshot {
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
		comm, ppid, ticks, ok := readProcStat(pid)
		if !ok {
			continue
		}
		group, known := groups[pid]
		switch {
		case known:
		case pid == self:
			group = "bench"
		case comm == "postgres" && servesJobStore(pid):
			group = "jobs-pg"
		case comm == "postgres" && servesBench(pid):
			group = "postgres"
		case comm == "redis-server":
			group = "redis"
		case comm == "beam.smp" && isRabbitServer(pid):
			group = "rabbitmq"
		case sqsServer.pids[pid]:
			group = "goaws"
		case comm == "expiryctl" && ppid == self:
			group = "expiryctl"
		}
		// A backend's title names its database only once it has
		// authenticated, so an unclaimed postgres process is asked again.
		if groups != nil && !known && (group != "" || comm != "postgres") {
			groups[pid] = group
		}
		if group == "" {
			continue
		}
		s.procs[pid] = procTicks{group, ticks}
	}
	return s
}

// cpuMonitor samples /proc while a measurement runs, so that processes
// that start and exit during it (the binary, its PostgreSQL backends) are
// counted up to their last sample.
type cpuMonitor struct {
	first cpuSnapshot
	last  map[int]procTicks
	stop  chan struct{}
	done  chan cpuUse
}

func startCPU() *cpuMonitor {
	m := &cpuMonitor{first: takeCPU(), last: map[int]procTicks{}, stop: make(chan struct{}), done: make(chan cpuUse, 1)}
	go func() {
		groups := map[int]string{}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				m.merge(takeCPUCached(groups))
			case <-m.stop:
				end := takeCPUCached(groups)
				m.merge(end)
				m.done <- m.use(end.machine)
				return
			}
		}
	}()
	return m
}

// Stop ends the measurement and returns where the CPU went.
func (m *cpuMonitor) Stop() cpuUse {
	close(m.stop)
	return <-m.done
}

func (m *cpuMonitor) merge(s cpuSnapshot) {
	for pid, p := range s.procs {
		if old, ok := m.last[pid]; !ok || old.group != p.group || p.ticks >= old.ticks {
			m.last[pid] = p
		}
	}
}

func (m *cpuMonitor) use(machineEnd int64) cpuUse {
	u := cpuUse{Groups: map[string]float64{}, Machine: float64(machineEnd-m.first.machine) / clockTicks}
	for pid, p := range m.last {
		d := p.ticks
		if old, ok := m.first.procs[pid]; ok && old.group == p.group {
			d -= old.ticks
		}
		u.Groups[p.group] += float64(d) / clockTicks
	}
	return u
}

// add sums o into u: the CPU of a phase timed in rounds, the work between
// them left out.
func (u *cpuUse) add(o cpuUse) {
	for g, v := range o.Groups {
		u.Groups[g] += v
	}
	u.Machine += o.Machine
}

// cpuGroups are the groups takeCPU names, in the order the notes list them.
var cpuGroups = []string{"rabbitmq", "goaws", "redis", "jobs-pg", "postgres", "bench", "expiryctl"}

// known is the CPU of the processes the benchmark involves, in seconds.
func (u cpuUse) known() float64 {
	var sum float64
	for _, v := range u.Groups {
		sum += v
	}
	return sum
}

// OtherShare is the fraction of the machine's CPU capacity over wall that
// went to processes the benchmark did not start or talk to.
func (u cpuUse) OtherShare(wall time.Duration) float64 {
	return max(u.Machine-u.known(), 0) / (wall.Seconds() * float64(runtime.NumCPU()))
}

func (u cpuUse) String() string {
	var parts []string
	var known float64
	for _, g := range cpuGroups {
		if v, ok := u.Groups[g]; ok && v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1fs", g, v))
			known += v
		}
	}
	parts = append(parts, fmt.Sprintf("other %.1fs", max(u.Machine-known, 0)))
	return "CPU " + strings.Join(parts, ", ")
}

// PerItem is the CPU of each group divided by n, in microseconds: what one
// letter costs each component, which stays comparable between runs when
// the machine's other load makes rates drift.
func (u cpuUse) PerItem(n int) string {
	if n <= 0 {
		return "-"
	}
	var parts []string
	for _, g := range cpuGroups {
		if v, ok := u.Groups[g]; ok && v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f µs", g, 1e6*v/float64(n)))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// readProcStat returns a process's command name, parent and utime+stime.
func readProcStat(pid int) (comm string, ppid int, ticks int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, false
	}
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return "", 0, 0, false
	}
	comm = string(b[open+1 : close])
	f := strings.Fields(string(b[close+1:]))
	// After the comm: state is index 0, ppid 1, utime 11, stime 12.
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return comm, ppid, ut + st, true
}

// servesBench tells the PostgreSQL processes that work for the benchmark
// (backends on its databases, whose process title names the database, and
// the WAL writer, checkpointer and background writer that every write goes
// through) from backends serving anyone else on a shared server.
func servesBench(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, s := range []string{" expiryctl_bench_" + runID + "_", "walwriter", "checkpointer", "background writer"} {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// servesJobStore tells the backends on a job store's database (River's, a
// jobs table's; createEmptyDB with jobStorePurpose) from the archive's, so
// that what reading or retrying the jobs costs PostgreSQL shows apart from
// what storing letters and bookkeeping a run cost it.
func servesJobStore(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte(" expiryctl_bench_"+runID+"_"+jobStorePurpose+"_"))
}

// isRabbitServer tells the broker's VM from rabbitmqctl's, which is also a
// beam.smp.
func isRabbitServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte("rabbit\x00boot"))
}
