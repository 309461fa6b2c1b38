package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// httpSessions and httpClients shape BenchmarkCommandsHTTP.
const (
	httpSessions = 200
	httpClients  = 16
)

// BenchmarkCommandsHTTP measures commands over HTTP on `up` (external
// sidecar mode): httpClients clients POST Queued messages to the
// messages/queue of httpSessions running sessions, round robin, each
// waiting for its answer (201, the command applied), beside GET /healthz
// from as many clients in the same run, the HTTP floor of the same server.
// Each row prints req/s and the p50 and p99 of one request. The enqueue row
// also prints what one request cost the whole stack: CPU milliseconds of
// this process (`up` and the clients), of Postgres and of Redis, and
// JetStream messages stored, Postgres transactions and rows written (the
// events it raised are handled by reactions and projections after its
// answer; what they did by the end of the row counts too). b.N of up to
// 20 per session stays within each session's burst of the rate limit, so
// no request is refused; a refused one fails the benchmark. The whole stack
// runs in the test process, so -cpuprofile profiles all of it.
//
//	go test ./cmd/agentbus -run '^$' -bench '^BenchmarkCommandsHTTP$' -benchtime=2000x
func BenchmarkCommandsHTTP(b *testing.B) {
	st := startSteeringStack(b)
	st.grow(b, httpSessions)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: httpClients, MaxConnsPerHost: httpClients}}
	run := func(b *testing.B, req func(i int) (*http.Request, int)) {
		var next atomic.Int64
		lat := make([][]time.Duration, httpClients)
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for c := range httpClients {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
					r, want := req(i)
					t0 := time.Now()
					resp, err := client.Do(r)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						b.Errorf("%s %s: %d, want %d", r.Method, r.URL.Path, resp.StatusCode, want)
						return
					}
					lat[c] = append(lat[c], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		all := slices.Concat(lat...)
		if len(all) == 0 {
			return
		}
		p50, p99, mx := quantiles(all)
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
		b.ReportMetric(mx, "max-ms")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("GET=healthz", func(b *testing.B) {
		run(b, func(int) (*http.Request, int) {
			r, _ := http.NewRequest(http.MethodGet, st.base+"/healthz", nil)
			return r, http.StatusOK
		})
	})
	var sent atomic.Int64
	b.Run("POST=enqueue", func(b *testing.B) {
		before, cpu := st.counters(b), processCPU()
		run(b, func(int) (*http.Request, int) {
			n := sent.Add(1)
			id := st.ids[int(n)%len(st.ids)]
			r, _ := http.NewRequest(http.MethodPost, st.base+"/api/agents/sessions/"+id+"/messages/queue",
				strings.NewReader(fmt.Sprintf(`{"content":"Next n=%d","priority":"Queued"}`, n)))
			r.Header.Set("Authorization", "Bearer "+st.token)
			r.Header.Set("Content-Type", "application/json")
			return r, http.StatusCreated
		})
		// The reactions to the last requests' events finish after their
		// answers; Postgres publishes its statistics within a second.
		time.Sleep(2 * time.Second)
		after, spent := st.counters(b), processCPU()
		per := func(d float64) float64 { return d / float64(b.N) }
		for name, s := range spent {
			b.ReportMetric(per(s-cpu[name])*1000, "cpu-ms/req-"+name)
		}
		b.ReportMetric(per(float64(after.jsStored-before.jsStored)), "js-msgs/req")
		b.ReportMetric(per(float64(after.pgXacts-before.pgXacts)), "pg-xacts/req")
		b.ReportMetric(per(float64(after.pgTuples-before.pgTuples)), "pg-rows/req")
	})
}

// processCPU returns the CPU seconds (user and system) spent so far by this
// process ("up") and by the servers it started, Postgres (every backend)
// and Redis, read from /proc; empty where there is no /proc. Backends that
// already exited are not counted: the stack keeps its connections open.
func processCPU() map[string]float64 {
	type proc struct {
		ppid int
		name string
		cpu  float64
	}
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime, comm may hold spaces.
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || end+2 > len(s) {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		procs[pid] = proc{ppid: ppid, name: s[open+1 : end], cpu: (utime + stime) / 100} // USER_HZ
	}
	self := os.Getpid()
	out := map[string]float64{}
	for pid, p := range procs {
		var name string
		switch {
		case pid == self:
			name = "up"
		case strings.HasPrefix(p.name, "postgres"):
			name = "postgres"
		case strings.HasPrefix(p.name, "redis"):
			name = "redis"
		default:
			continue
		}
		// Only this process's own servers: descendants of it.
		for q := pid; q > 1; q = procs[q].ppid {
			if q == self {
				out[name] += p.cpu
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return out
}
