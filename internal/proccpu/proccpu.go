// Package proccpu reads from /proc the CPU time spent by this process and
// the servers it started, for the benchmarks that report what a request
// costs the whole stack, Postgres and Redis included.
package proccpu

import (
	"os"
	"strconv"
	"strings"
)

// Process is this process or one of its descendants.
type Process struct {
	// Name is the command's name (comm), e.g. "postgres".
	Name string
	// Self marks this process.
	Self bool
	// CPU is the seconds it spent so far, user and system; Waited is
	// those of its children it waited for, which exited (a Postgres
	// backend that closed, say).
	CPU, Waited float64
}

// userHZ is the unit of the times in /proc/<pid>/stat.
const userHZ = 100

// Tree returns this process and its descendants; none where there is no
// /proc.
func Tree() []Process {
	type entry struct {
		ppid int
		p    Process
	}
	procs := map[int]entry{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ... utime stime cutime cstime; comm may
		// hold spaces and parentheses.
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || end+2 > len(s) {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 15 {
			continue
		}
		ticks := make([]float64, 4)
		for i, v := range f[11:15] {
			ticks[i], _ = strconv.ParseFloat(v, 64)
		}
		ppid, _ := strconv.Atoi(f[1])
		procs[pid] = entry{ppid: ppid, p: Process{Name: s[open+1 : end],
			CPU: (ticks[0] + ticks[1]) / userHZ, Waited: (ticks[2] + ticks[3]) / userHZ}}
	}
	self := os.Getpid()
	var out []Process
	for pid, e := range procs {
		for q := pid; q > 1; q = procs[q].ppid {
			if q == self {
				e.p.Self = pid == self
				out = append(out, e.p)
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return out
}
