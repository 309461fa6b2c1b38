package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// envDeliverySessions sets how many sessions BenchmarkDeliveryUnderLoad
// drives at once (default 200).
const envDeliverySessions = "AGENTBUS_BENCH_DELIVERY_SESSIONS"

// deliveryClients is how many clients send messages at once.
const deliveryClients = 16

// BenchmarkDeliveryUnderLoad sends b.N messages to many live sessions at
// once through `up` and its real runtime (each session's agent a sandboxed
// sidecar process of the script engine) and checks that every accepted
// message reached its agent exactly once: one message_delivered raw event
// per accepted message, none for a message never accepted. Half the
// sessions are mid-turn (a long suite of tool calls) and are steered with
// Immediate messages; the other half are between short turns and get
// Queued and Immediate messages, each of which starts or joins a turn. It
// reports p50/p99/max of the time from the API's answer (accepted) to the
// message_delivered event on the bus, the agent's own word that it took
// the message. Each client sends as the API asks clients to: with an
// Idempotency-Key, repeated on 503 or 504; those answers are counted and
// printed, since a repeat that ran the command twice would show here as a
// message delivered twice.
//
//	go test ./cmd/agentbus -run '^$' -bench '^BenchmarkDeliveryUnderLoad$' -benchtime=2000x
func BenchmarkDeliveryUnderLoad(b *testing.B) {
	n := 200
	if v := os.Getenv(envDeliverySessions); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, envDeliverySessions)
	}
	u := startUpWithRuntime(b)
	u.Must(http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": n + 5}, nil)
	ids, steered := startDeliverySessions(u, n)
	delivered := watchDelivered(b, u)

	b.ResetTimer()
	accepted, answers := sendDeliveryLoad(u, ids, steered, b.N)
	b.StopTimer()
	if b.Failed() {
		return
	}

	missing := delivered.wait(accepted, 5*time.Minute)
	require.Empty(b, missing, "accepted messages that never reached their agent")
	doubled, phantom := delivered.wrong(accepted)
	require.Empty(b, doubled, "messages that reached their agent more than once")
	require.Empty(b, phantom, "messages that reached an agent without being accepted")
	b.ReportMetric(float64(n), "sessions")
	b.ReportMetric(float64(len(accepted)), "accepted")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("delivery under load: %d sessions, %d messages accepted, every one delivered once; answers repeated with the same key: %v\n",
		n, len(accepted), answers)
	for _, priority := range []string{"Immediate", "Queued"} {
		lat := delivered.latencies(accepted, priority)
		if len(lat) == 0 {
			continue
		}
		p50, p99, mx := quantiles(lat)
		b.ReportMetric(p50, priority+"-p50-ms")
		b.ReportMetric(p99, priority+"-p99-ms")
		fmt.Printf("  %-9s %5d messages: accepted→delivered p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", priority, len(lat), p50, p99, mx)
	}
}

// startDeliverySessions starts n sessions, every other one on a long
// suite of tool calls, and waits until each has its sidecar: the steered
// ones mid-turn, the others idle after their first turn. steered[id]
// says which are mid-turn.
func startDeliverySessions(u *upUnderTest, n int) (ids []string, steered map[string]bool) {
	steered = map[string]bool{}
	for i := range n {
		objective := "Say hello"
		if i%2 == 0 {
			objective = "Run the suite [scenario:suite]"
		}
		id := u.start(map[string]any{"objective": objective, "workingDirectory": fmt.Sprintf("delivery-%d", i)})
		ids = append(ids, id)
		steered[id] = i%2 == 0
	}
	for _, id := range ids {
		if steered[id] {
			u.waitStatus(id, "Running")
		} else {
			u.waitReview(id)
		}
	}
	return ids, steered
}

// sendDeliveryLoad sends total messages round robin over ids from
// deliveryClients clients, and returns when each was accepted, by message
// id. A message to a session mid-turn is Immediate; the others alternate
// Queued and Immediate. An Immediate message reaches an agent mid-turn at
// its next safe point; a Queued one waits for the turn it joins to end.
func sendDeliveryLoad(u *upUnderTest, ids []string, steered map[string]bool, total int) (accepted map[string]acceptance, answers map[int]int) {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	accepted, answers = map[string]acceptance{}, map[int]int{}
	for range deliveryClients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < total; i = int(next.Add(1)) - 1 {
				id := ids[i%len(ids)]
				priority := "Immediate"
				if !steered[id] && i/len(ids)%2 == 1 {
					priority = "Queued"
				}
				messageID, repeats := enqueueOnce(u, id, fmt.Sprintf("Delivery check #%d#", i), priority)
				at := time.Now()
				mu.Lock()
				accepted[messageID] = acceptance{at: at, priority: priority}
				for code, n := range repeats {
					answers[code] += n
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return accepted, answers
}

// enqueueOnce sends a message as a client should: with an Idempotency-Key,
// repeated with the same key while the answer is 503 or 504 (the command
// is stored and runs; its result came late). It returns the message's id
// and how many answers of each 5xx status came before the one accepting
// it.
func enqueueOnce(u *upUnderTest, id, content, priority string) (messageID string, repeats map[int]int) {
	repeats = map[int]int{}
	key := uuid.NewString()
	body, err := json.Marshal(map[string]any{"content": content, "priority": priority})
	if err != nil {
		panic(err)
	}
	for {
		req, err := http.NewRequest(http.MethodPost, u.base+"/api/agents/sessions/"+id+"/messages/queue", bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer "+u.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.IdempotencyKeyHeader, key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			u.t.Errorf("enqueue to %s: %v", id, err)
			return "", repeats
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated:
			var out struct {
				MessageID string `json:"messageId"`
			}
			if err := json.Unmarshal(raw, &out); err != nil || out.MessageID == "" {
				u.t.Errorf("enqueue to %s: %s", id, raw)
			}
			return out.MessageID, repeats
		case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
			repeats[resp.StatusCode]++
			time.Sleep(200 * time.Millisecond)
		default:
			u.t.Errorf("enqueue to %s answered %d: %s", id, resp.StatusCode, raw)
			return "", repeats
		}
	}
}

// acceptance is when the API accepted a message, and its priority.
type acceptance struct {
	at       time.Time
	priority string
}

// deliveries records each message_delivered raw event on the bus: when it
// was first seen and how many there were, by message id.
type deliveries struct {
	mu    sync.Mutex
	first map[string]time.Time
	count map[string]int
}

// watchDelivered follows the message_delivered raw events of every
// session from now on.
func watchDelivered(b *testing.B, u *upUnderTest) *deliveries {
	d := &deliveries{first: map[string]time.Time{}, count: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	c, err := u.jetStream().OrderedConsumer(ctx, bus.StreamSidecarEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SidecarEventSubject("*", protocol.EventMessageDelivered)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	require.NoError(b, err)
	cc, err := c.Consume(func(m jetstream.Msg) {
		at := time.Now()
		var ev relay.Event
		var md protocol.MessageDelivered
		if json.Unmarshal(m.Data(), &ev) != nil || json.Unmarshal(ev.Data, &md) != nil {
			b.Errorf("unreadable message_delivered on %s: %s", m.Subject(), m.Data())
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.count[md.MessageID] == 0 {
			d.first[md.MessageID] = at
		}
		d.count[md.MessageID]++
	})
	require.NoError(b, err)
	b.Cleanup(cc.Stop)
	return d
}

// wait waits up to limit for every accepted message to be delivered, and
// returns the messages still not delivered.
func (d *deliveries) wait(accepted map[string]acceptance, limit time.Duration) (missing []string) {
	deadline := time.Now().Add(limit)
	for {
		d.mu.Lock()
		missing = missing[:0]
		for id := range accepted {
			if _, ok := d.first[id]; !ok {
				missing = append(missing, id)
			}
		}
		d.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// latencies returns the time from acceptance to delivery of each
// delivered message of priority. A delivery seen before the API's answer
// reached the client counts as no time.
func (d *deliveries) latencies(accepted map[string]acceptance, priority string) []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	var lat []time.Duration
	for id, a := range accepted {
		if got, ok := d.first[id]; ok && a.priority == priority {
			lat = append(lat, max(got.Sub(a.at), 0))
		}
	}
	return lat
}

// wrong returns the messages delivered more than once, and those
// delivered but never accepted.
func (d *deliveries) wrong(accepted map[string]acceptance) (doubled map[string]int, phantom []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	doubled = map[string]int{}
	for id, n := range d.count {
		if n > 1 {
			doubled[id] = n
		}
		if _, ok := accepted[id]; !ok {
			phantom = append(phantom, id)
		}
	}
	return doubled, phantom
}
