package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// doorMsg is what the tests read of a message of either door.
type doorMsg struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionId"`
	EventID   uint64          `json:"eventId"`
	ReplyTo   string          `json:"replyTo"`
	RequestID string          `json:"requestId"`
	Data      json.RawMessage `json:"data"`
	Raw       string          `json:"-"`
}

// field reads a string field of the message's data (WebSocket) or of the
// message itself (NDJSON, whose fields are flat).
func (m doorMsg) field(name string) string {
	var obj map[string]any
	src := m.Data
	if len(src) == 0 {
		src = json.RawMessage(m.Raw)
	}
	if json.Unmarshal(src, &obj) != nil {
		return ""
	}
	switch v := obj[name].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		raw, _ := json.Marshal(v)
		return string(raw)
	}
}

// msgLog collects the messages a client received, for the test to wait on.
type msgLog struct {
	t      *testing.T
	mu     sync.Mutex
	msgs   []doorMsg
	notify chan struct{}
	closed error
}

func newMsgLog(t *testing.T) *msgLog {
	return &msgLog{t: t, notify: make(chan struct{}, 1)}
}

func (l *msgLog) add(raw []byte) {
	var m doorMsg
	if err := json.Unmarshal(raw, &m); err != nil {
		m = doorMsg{Type: "<not json>"}
	}
	m.Raw = string(raw)
	l.mu.Lock()
	l.msgs = append(l.msgs, m)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *msgLog) end(err error) {
	l.mu.Lock()
	if err == nil {
		err = errors.New("closed")
	}
	l.closed = err
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

func (l *msgLog) all() []doorMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]doorMsg(nil), l.msgs...)
}

// waitFor returns the first message that satisfies ok, waiting for it.
func (l *msgLog) waitFor(what string, ok func(doorMsg) bool) doorMsg {
	l.t.Helper()
	deadline := time.Now().Add(2 * wait)
	for {
		for _, m := range l.all() {
			if ok(m) {
				return m
			}
		}
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed != nil || time.Now().After(deadline) {
			l.t.Fatalf("never received %s (connection: %v); received:\n%s", what, closed, l.dump())
		}
		select {
		case <-l.notify:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *msgLog) dump() string {
	var b strings.Builder
	for _, m := range l.all() {
		b.WriteString(m.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// of returns a predicate: a message of type typ for session sid (any
// session when empty) whose data mentions each of mention.
func of(typ, sid string, mention ...string) func(doorMsg) bool {
	return func(m doorMsg) bool {
		if m.Type != typ || (sid != "" && m.SessionID != sid) {
			return false
		}
		for _, s := range mention {
			if !strings.Contains(m.Raw, s) {
				return false
			}
		}
		return true
	}
}

func replyTo(id string) func(doorMsg) bool {
	return func(m doorMsg) bool { return m.ReplyTo == id || m.RequestID == id }
}

// wsClient is a WebSocket client of the door, as a program would use it.
type wsClient struct {
	*msgLog
	c *websocket.Conn
}

func dialWS(t *testing.T, base, token string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/agents/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	require.NoError(t, err)
	c.SetReadLimit(1 << 20)
	w := &wsClient{msgLog: newMsgLog(t), c: c}
	go func() {
		for {
			_, raw, err := c.Read(context.Background())
			if err != nil {
				w.end(err)
				return
			}
			w.add(raw)
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return w
}

func (w *wsClient) send(msg map[string]any) {
	w.t.Helper()
	if _, ok := msg["timestamp"]; !ok {
		msg["timestamp"] = time.Now().UnixMilli()
	}
	raw, err := json.Marshal(msg)
	require.NoError(w.t, err)
	w.sendRaw(raw)
}

func (w *wsClient) sendRaw(raw []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(w.t, w.c.Write(ctx, websocket.MessageText, raw))
}

// call sends a message with a fresh id and returns the answer to it.
func (w *wsClient) call(id string, msg map[string]any) doorMsg {
	w.t.Helper()
	msg["id"] = id
	w.send(msg)
	return w.waitFor("the answer to "+id, replyTo(id))
}

// mustCall is call for an answer that is not an error.
func (w *wsClient) mustCall(id string, msg map[string]any) doorMsg {
	w.t.Helper()
	m := w.call(id, msg)
	require.NotEqual(w.t, "error", m.Type, "%s answered %s", id, m.Raw)
	return m
}
