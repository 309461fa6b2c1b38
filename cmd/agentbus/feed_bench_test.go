package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	feedpkg "github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/relay"
)

// latencies collects delivery latencies of numbered items.
type latencies struct {
	mu   sync.Mutex
	sent []atomic.Int64 // unix nanoseconds of each item's XADD
	got  []time.Duration
	want int
	all  chan struct{}
	// stored, when set, receives the time each item was stored in the
	// stream it was read from, for the stage breakdown.
	stored []atomic.Int64
	// arrivals are the items' numbers and arrival times, in arrival order.
	arrivals []arrival
}

type arrival struct {
	n  int
	at time.Time
}

func (l *latencies) add(n int, at time.Time) {
	l.addStored(n, at, time.Time{})
}

func (l *latencies) addStored(n int, at, stored time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 0 || n >= len(l.sent) {
		return
	}
	if l.stored != nil {
		l.stored[n].Store(stored.UnixNano())
	}
	l.arrivals = append(l.arrivals, arrival{n, at})
	l.got = append(l.got, at.Sub(time.Unix(0, l.sent[n].Load())))
	if len(l.got) == l.want {
		close(l.all)
	}
}

func (l *latencies) wait(b *testing.B, what string) []time.Duration {
	select {
	case <-l.all:
	case <-time.After(2 * wait):
		l.mu.Lock()
		defer l.mu.Unlock()
		b.Fatalf("%s: %d of %d items arrived", what, len(l.got), l.want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// since is the time from each item's time in from (unix nanoseconds) to
// its arrival here.
func (l *latencies) since(from []atomic.Int64) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := make([]time.Duration, len(l.arrivals))
	for i, a := range l.arrivals {
		lat[i] = a.at.Sub(time.Unix(0, from[a.n].Load()))
	}
	return lat
}

// itemNumber reads the n of a text "n=<n>".
func itemNumber(text string) int {
	i := strings.Index(text, "n=")
	if i < 0 {
		return -1
	}
	j := i + 2
	for j < len(text) && text[j] >= '0' && text[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(text[i+2 : j])
	if err != nil {
		return -1
	}
	return n
}

func percentiles(lat []time.Duration) (p50, p99 float64) {
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	return p(0.50), p(0.99)
}

// BenchmarkLiveFeed runs up (relay, ACL, API) with 100 sessions, each
// streaming 50 raw events a second to two SSE clients of its session
// stream, and measures the time from the raw event's XADD to each SSE
// client receiving it, beside the relay's own latency (XADD to a
// JetStream consumer of AGENTS_SIDECAR_EVENTS) and the ACL's (XADD to a
// JetStream consumer of the feed items on AGENTS_EVENTS) in the same run. b.N is the
// number of raw events; run with e.g. -benchtime=5000x.
//
// The stage metrics split the feed latency by the times JetStream stored
// each item: stage-relay from the XADD to the raw event stored in
// AGENTS_SIDECAR_EVENTS, stage-acl from there to the feed item stored in
// AGENTS_EVENTS, stage-sse from there to the SSE client.
func BenchmarkLiveFeed(b *testing.B) {
	const (
		sessions    = 100
		subscribers = 2
		perSecond   = 50
	)
	u := startExternalUp(b, "feedbench")
	base, token, owner, ctx, js, kv, rdb := u.base, u.token, u.owner, u.ctx, u.js, u.kv, u.rdb

	ids := make([]string, sessions)
	for i := range ids {
		body := fmt.Sprintf(`{"workingDirectory":%q,"objective":"Stream","budgetCapUsd":5}`, u.dataDir+"/workspace/"+owner+"/s"+strconv.Itoa(i))
		req, err := http.NewRequest(http.MethodPost, base+"/api/agents/sessions", strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		var out struct {
			Session struct {
				ID string `json:"id"`
			} `json:"session"`
		}
		require.NoError(b, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		require.NotEmpty(b, out.Session.ID)
		ids[i] = out.Session.ID
		require.NoError(b, relay.Activate(ctx, kv, ids[i]))
	}

	rawStored, feedStored := make([]atomic.Int64, b.N), make([]atomic.Int64, b.N)
	feed := &latencies{sent: make([]atomic.Int64, b.N), want: b.N * subscribers, all: make(chan struct{})}
	relayed := &latencies{sent: feed.sent, want: b.N, all: make(chan struct{}), stored: rawStored}
	recorded := &latencies{sent: feed.sent, want: b.N, all: make(chan struct{}), stored: feedStored}

	// The relay's own latency: a consumer of the raw events.
	raw, err := js.OrderedConsumer(ctx, bus.StreamSidecarEvents, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	require.NoError(b, err)
	cc, err := raw.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var ev relay.Event
		if json.Unmarshal(m.Data(), &ev) != nil {
			return
		}
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		md, err := m.Metadata()
		if err != nil {
			return
		}
		relayed.addStored(itemNumber(d.Text), now, md.Timestamp)
	})
	require.NoError(b, err)
	b.Cleanup(cc.Stop)

	// The ACL's latency: a consumer of the feed items it publishes.
	items, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(feedpkg.Aggregate, "*", feedpkg.KindAssistantText)},
		DeliverPolicy:  jetstream.DeliverNewPolicy})
	require.NoError(b, err)
	ic, err := items.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var env bus.Envelope
		if json.Unmarshal(m.Data(), &env) != nil {
			return
		}
		var d feedpkg.LiveAssistantText
		_ = json.Unmarshal(env.Data, &d)
		md, err := m.Metadata()
		if err != nil {
			return
		}
		recorded.addStored(itemNumber(d.Text), now, md.Timestamp)
	})
	require.NoError(b, err)
	b.Cleanup(ic.Stop)

	// Two SSE clients per session.
	var opened sync.WaitGroup
	for _, id := range ids {
		for range subscribers {
			opened.Add(1)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/agents/sessions/"+id+"/stream", nil)
			require.NoError(b, err)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(b, err)
			require.Equal(b, http.StatusOK, resp.StatusCode)
			go func() {
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
				first := true
				event := ""
				for sc.Scan() {
					line := sc.Text()
					switch {
					case strings.HasPrefix(line, "event: "):
						event = strings.TrimPrefix(line, "event: ")
					case strings.HasPrefix(line, "data: "):
						now := time.Now()
						if first && event == "ping" {
							first = false
							opened.Done()
						}
						if event == "assistant_text" {
							feed.add(itemNumber(line), now)
						}
					case line == "":
						event = ""
					}
				}
			}()
		}
	}
	opened.Wait()

	b.ResetTimer()
	cpuBefore := processCPU()
	tick := time.NewTicker(time.Second / (sessions * perSecond))
	defer tick.Stop()
	for i := range b.N {
		<-tick.C
		feed.sent[i].Store(time.Now().UnixNano())
		require.NoError(b, rdb.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(ids[i%sessions]), Values: []any{
			"type", "assistant_message", "ts", strconv.FormatInt(time.Now().UnixMilli(), 10),
			"data", fmt.Sprintf(`{"message_id":"msg_%d","block_type":"text","text":"n=%d"}`, i, i),
		}}).Err())
	}
	relayLat := relayed.wait(b, "relay")
	aclLat := recorded.wait(b, "acl")
	feedLat := feed.wait(b, "feed")
	b.StopTimer()
	// On a shared machine the latencies follow the neighbours' load; the
	// CPU spent per thousand raw events much less: by this process (up
	// with its NATS server, and the clients), Postgres and Redis.
	for name, spent := range processCPU() {
		b.ReportMetric((spent-cpuBefore[name])*1000/float64(b.N), "cpu-s/1000-events-"+name)
	}
	r50, r99 := percentiles(relayLat)
	a50, a99 := percentiles(aclLat)
	f50, f99 := percentiles(feedLat)
	b.ReportMetric(r50, "relay-p50-ms")
	b.ReportMetric(r99, "relay-p99-ms")
	b.ReportMetric(a50, "acl-p50-ms")
	b.ReportMetric(a99, "acl-p99-ms")
	b.ReportMetric(f50, "feed-p50-ms")
	b.ReportMetric(f99, "feed-p99-ms")
	// The stages, from the stored times; the relay's and the ACL's items
	// have all arrived, so every stored time is known.
	storedRelay, storedACL := make([]time.Duration, b.N), make([]time.Duration, b.N)
	for i := range b.N {
		storedRelay[i] = time.Duration(rawStored[i].Load() - feed.sent[i].Load())
		storedACL[i] = time.Duration(feedStored[i].Load() - rawStored[i].Load())
	}
	for name, lat := range map[string][]time.Duration{"relay": storedRelay, "acl": storedACL, "sse": feed.since(feedStored)} {
		p50, p99 := percentiles(lat)
		b.ReportMetric(p50, "stage-"+name+"-p50-ms")
		b.ReportMetric(p99, "stage-"+name+"-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
