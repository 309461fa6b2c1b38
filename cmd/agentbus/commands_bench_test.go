package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/agentbus/agentbus/internal/proccpu"
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
// runs in the test process, so -cpuprofile profiles all of it. The
// skeleton row runs the same clients against the skeleton of the same
// durable work (see skeleton) and prints the same figures; a table of the
// rows and the ratios ours/skeleton closes the output.
//
//	go test ./cmd/agentbus -run '^$' -bench '^BenchmarkCommandsHTTP$' -benchtime=2000x
func BenchmarkCommandsHTTP(b *testing.B) {
	st := startSteeringStack(b)
	st.grow(b, httpSessions)
	skel := startSkeleton(b, st, httpSessions, false)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: httpClients, MaxConnsPerHost: httpClients}}
	// The last measurement of each row, for the closing table.
	type result struct {
		rps, p50, p99, max float64
		cpu                map[string]float64 // ms per request
	}
	results := map[string]*result{}
	run := func(b *testing.B, req func(i int) (*http.Request, int)) *result {
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
			return &result{}
		}
		r := &result{rps: float64(len(all)) / elapsed.Seconds()}
		r.p50, r.p99, r.max = quantiles(all)
		b.ReportMetric(r.rps, "req/s")
		b.ReportMetric(r.p50, "p50-ms")
		b.ReportMetric(r.p99, "p99-ms")
		b.ReportMetric(r.max, "max-ms")
		b.ReportMetric(0, "ns/op")
		return r
	}
	// cpuPerRequest reports the CPU milliseconds per request spent since
	// cpu (see processCPU).
	cpuPerRequest := func(b *testing.B, r *result, cpu map[string]float64) {
		spent := processCPU()
		r.cpu = map[string]float64{}
		for name, s := range spent {
			r.cpu[name] = (s - cpu[name]) * 1000 / float64(b.N)
			b.ReportMetric(r.cpu[name], "cpu-ms/req-"+name)
		}
	}
	b.Run("GET=healthz", func(b *testing.B) {
		// Its CPU per request is what the clients and the HTTP server
		// alone cost, in both POST rows too.
		cpu := processCPU()
		r := run(b, func(int) (*http.Request, int) {
			r, _ := http.NewRequest(http.MethodGet, st.base+"/healthz", nil)
			return r, http.StatusOK
		})
		cpuPerRequest(b, r, cpu)
		results["GET /healthz"] = r
	})
	var sent atomic.Int64
	b.Run("POST=enqueue", func(b *testing.B) {
		before, cpu := st.counters(b), processCPU()
		r := run(b, func(int) (*http.Request, int) {
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
		cpuPerRequest(b, r, cpu)
		after := st.counters(b)
		per := func(d float64) float64 { return d / float64(b.N) }
		b.ReportMetric(per(float64(after.jsStored-before.jsStored)), "js-msgs/req")
		b.ReportMetric(per(float64(after.pgXacts-before.pgXacts)), "pg-xacts/req")
		b.ReportMetric(per(float64(after.pgStatements-before.pgStatements)), "pg-statements/req")
		if before.diskFlushes >= 0 && after.diskFlushes >= 0 {
			b.ReportMetric(per(float64(after.diskFlushes-before.diskFlushes)), "disk-flushes/req")
		}
		b.ReportMetric(per(float64(after.pgTuples-before.pgTuples)), "pg-rows/req")
		results["POST enqueue (ours)"] = r
	})
	// The same clients against the skeleton of the same durable work (see
	// skeleton): publish the command fsynced, a worker runs a transaction
	// of two round trips and replies, the handler answers 201, the worker
	// publishes one event fsynced.
	b.Run("POST=skeleton", func(b *testing.B) {
		cpu := processCPU()
		r := run(b, func(i int) (*http.Request, int) {
			return skel.request(i, fmt.Sprintf("Next n=%d", i)), http.StatusCreated
		})
		time.Sleep(2 * time.Second) // as ours: what follows the answers counts too
		cpuPerRequest(b, r, cpu)
		results["POST skeleton"] = r
	})

	// Printed, not logged: a benchmark with sub-benchmarks drops its own
	// log unless it fails.
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Printf("commands over HTTP, %d clients across %d sessions, beside the skeleton (same servers, same run):\n", httpClients, httpSessions)
	fmt.Fprintln(w, "row\treq/s\tp50 ms\tp99 ms\tmax ms\tcpu ms/req up\tpostgres\tredis\t")
	for _, name := range []string{"GET /healthz", "POST enqueue (ours)", "POST skeleton"} {
		if r := results[name]; r != nil {
			fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t\n",
				name, r.rps, r.p50, r.p99, r.max, r.cpu["up"], r.cpu["postgres"], r.cpu["redis"])
		}
	}
	_ = w.Flush()
	if ours, sk := results["POST enqueue (ours)"], results["POST skeleton"]; ours != nil && sk != nil && sk.rps > 0 {
		fmt.Printf("ours/skeleton: req/s %.2f×, p50 %.1f×, p99 %.1f×, cpu/req (up+postgres+redis) %.1f×\n",
			ours.rps/sk.rps, ours.p50/sk.p50, ours.p99/sk.p99, cpuSum(ours.cpu)/cpuSum(sk.cpu))
	}
}

func cpuSum(cpu map[string]float64) float64 {
	var s float64
	for _, v := range cpu {
		s += v
	}
	return s
}

// processCPU returns the CPU seconds (user and system) spent so far by this
// process ("up") and by the servers it started, Postgres (every backend)
// and Redis. Backends that already exited are not counted: the stack keeps
// its connections open.
func processCPU() map[string]float64 {
	out := map[string]float64{}
	for _, p := range proccpu.Tree() {
		switch {
		case p.Self:
			out["up"] += p.CPU
		case strings.HasPrefix(p.Name, "postgres"):
			out["postgres"] += p.CPU
		case strings.HasPrefix(p.Name, "redis"):
			out["redis"] += p.CPU
		}
	}
	return out
}
