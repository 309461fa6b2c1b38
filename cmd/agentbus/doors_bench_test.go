package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/relay"
)

// BenchmarkInputRoundTrip runs up (external sidecars: the bench reads
// the sidecars' Redis command streams itself) with 20 live sessions (a full default pool) and
// measures an Immediate input from the client until its
// steering_message entry is on the session's command stream, through
// the WebSocket (`input`) and through HTTP (POST .../messages/queue),
// alternating, in the same run. b.N is the number of inputs of each door;
// run with e.g. -benchtime=300x. Seed 004's target is a round trip under
// 100 ms.
func BenchmarkInputRoundTrip(b *testing.B) {
	const sessions = 20
	b.Setenv("AGENTBUS_DOOR_RATE", "100000")
	b.Setenv("AGENTBUS_DOOR_BURST", "100000")
	b.Setenv("AGENTBUS_DOOR_MAX_SESSIONS", fmt.Sprint(sessions))
	u := startExternalUp(b, "inputbench", "--socket", "off")
	base, token, ctx, kv, rdb := u.base, u.token, u.ctx, u.kv, u.rdb

	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/agents/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = ws.CloseNow() })
	ws.SetReadLimit(1 << 20)
	replies := make(chan map[string]any, 1024)
	go func() {
		for {
			_, raw, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(raw, &m) == nil && m["replyTo"] != nil {
				replies <- m
			}
		}
	}()
	wsSend := func(m map[string]any) {
		raw, err := json.Marshal(m)
		require.NoError(b, err)
		require.NoError(b, ws.Write(ctx, websocket.MessageText, raw))
	}
	ids := make([]string, sessions)
	for i := range ids {
		wsSend(map[string]any{"type": "start", "id": fmt.Sprint("start", i), "data": map[string]any{
			"workingDirectory": fmt.Sprintf("s%d", i), "objective": "Steer", "budgetCapUsd": 5}})
		m := <-replies
		require.Equal(b, "state", m["type"], "%v", m)
		ids[i] = m["sessionId"].(string)
		require.NoError(b, relay.Activate(ctx, kv, ids[i]))
	}
	for _, id := range ids {
		require.Eventually(b, func() bool {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/agents/sessions/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var s struct {
				Status string `json:"status"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&s)
			return s.Status == "Running"
		}, 2*wait, 20*time.Millisecond)
	}

	// arrived waits for the steering message n on the session's command
	// stream, after the entry last.
	arrived := func(id, last string, n int) {
		mark := fmt.Sprintf("n=%d;", n)
		for {
			res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{relay.CommandsKey(id), last}, Block: 2 * wait, Count: 100}).Result()
			require.NoError(b, err, "input %d never reached the command stream", n)
			for _, e := range res[0].Messages {
				last = e.ID
				if e.Values["type"] == "steering_message" && strings.Contains(fmt.Sprint(e.Values["data"]), mark) {
					return
				}
			}
		}
	}
	lastEntry := func(id string) string {
		es, err := rdb.XRevRangeN(ctx, relay.CommandsKey(id), "+", "-", 1).Result()
		require.NoError(b, err)
		if len(es) == 0 {
			return "0"
		}
		return es[0].ID
	}
	overWS := func(id string, n int) {
		wsSend(map[string]any{"type": "input", "sessionId": id, "id": fmt.Sprint("in", n),
			"data": map[string]any{"content": fmt.Sprintf("n=%d;", n), "priority": "Immediate"}})
	}
	overHTTP := func(id string, n int) {
		body, _ := json.Marshal(map[string]any{"content": fmt.Sprintf("n=%d;", n), "priority": "Immediate"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/agents/sessions/"+id+"/messages/queue", bytes.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusCreated, resp.StatusCode)
	}

	var wsLat, httpLat []time.Duration
	b.ResetTimer()
	for i := range 2 * b.N {
		id := ids[i%sessions]
		last := lastEntry(id)
		start := time.Now()
		if i%2 == 0 {
			overWS(id, i)
		} else {
			overHTTP(id, i)
		}
		arrived(id, last, i)
		if i%2 == 0 {
			wsLat = append(wsLat, time.Since(start))
		} else {
			httpLat = append(httpLat, time.Since(start))
		}
	}
	b.StopTimer()
	w50, w99 := percentiles(wsLat)
	h50, h99 := percentiles(httpLat)
	b.ReportMetric(w50, "ws-p50-ms")
	b.ReportMetric(w99, "ws-p99-ms")
	b.ReportMetric(h50, "http-p50-ms")
	b.ReportMetric(h99, "http-p99-ms")
	b.ReportMetric(w50/h50, "ws/http-p50")
	b.ReportMetric(0, "ns/op")
}
