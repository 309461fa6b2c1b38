package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadEventsParsesTheEventStreamFormat(t *testing.T) {
	body := ": a comment\n" +
		"id: 7\nevent: event\ndata: {\"a\":\ndata: 1}\n\n" +
		"event: ping\ndata: {}\n\n" +
		"data:{\"b\":2}\n\n" +
		"id: 9\n\n" + // no data: no event
		"id: 10\nevent: tool_call\ndata: {}\n"
	var got []Event
	require.NoError(t, readEvents(strings.NewReader(body), func(ev Event) error {
		got = append(got, ev)
		return nil
	}))
	assert.Equal(t, []Event{
		{ID: "7", Name: "event", Data: []byte("{\"a\":\n1}")},
		{Name: "ping", Data: []byte("{}")},
		{Name: "message", Data: []byte(`{"b":2}`)},
	}, got, "an event without its closing blank line is not dispatched")
}

// TestFollowSessionResumesWhereItWasLost serves a stream that asks the
// client to reconnect, then one that breaks off, then refuses: the
// client resumes each time after the last event it handled.
func TestFollowSessionResumesWhereItWasLost(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(asked)
		asked = append(asked, r.Header.Get("Last-Event-ID")+"|"+r.URL.Query().Get("since"))
		mu.Unlock()
		assert.Equal(t, "/api/agents/sessions/s1/stream", r.URL.Path)
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		if n == 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":404,"title":"Not Found","detail":"session s1 not found"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 0:
			fmt.Fprint(w, "event: ping\ndata: {}\n\nid: 1\nevent: event\ndata: {}\n\nid: 2\nevent: activity\ndata: {}\n\n")
			fmt.Fprint(w, "id: 2\nevent: reconnect\ndata: {\"lastEventId\":\"2\",\"reason\":\"slow_client\"}\n\n")
		case 1:
			fmt.Fprint(w, "id: 3\nevent: tool_call\ndata: {}\n\nid: 4\nevent: tool_res") // cut mid-event
		}
	}))
	defer srv.Close()

	var got []string
	var lost []string
	c := &Client{Base: srv.URL, Token: "tok"}
	err := c.FollowSession(context.Background(), "s1", Follow{Since: "0", Lost: func(last string, _ error) { lost = append(lost, last) }},
		func(ev Event) error {
			got = append(got, ev.ID+" "+ev.Name)
			return nil
		})
	var p *Problem
	require.ErrorAs(t, err, &p, "a refused stream ends the follow")
	assert.Equal(t, 404, p.Status)
	assert.Equal(t, "Not Found: session s1 not found", p.Error())
	assert.Equal(t, []string{"1 event", "2 activity", "3 tool_call"}, got)
	assert.Equal(t, []string{"|0", "2|", "3|"}, asked, "the first request starts at since, the others after the last event")
	assert.Equal(t, []string{"2", "3"}, lost)
}

func TestFollowSessionStopsWhenTheHandlerSays(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: event\ndata: {}\n\nid: 2\nevent: event\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	var got int
	c := &Client{Base: srv.URL}
	err := c.FollowSession(context.Background(), "s1", Follow{Idle: time.Minute}, func(Event) error {
		got++
		return Stop()
	})
	require.NoError(t, err)
	assert.Equal(t, 1, got)
}

// TestFollowSessionTakesASilentStreamForLost serves a stream that goes
// silent, heartbeats included, as a connection lost without a word does.
func TestFollowSessionTakesASilentStreamForLost(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(asked)
		asked = append(asked, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"status":410,"title":"Gone"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: event\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	var lostWith error
	c := &Client{Base: srv.URL}
	err := c.FollowSession(context.Background(), "s1", Follow{Idle: 200 * time.Millisecond, Lost: func(_ string, err error) { lostWith = err }},
		func(Event) error { return nil })
	require.Error(t, err)
	require.Error(t, lostWith)
	assert.Contains(t, lostWith.Error(), "no heartbeat for 200ms")
	assert.Equal(t, []string{"", "1"}, asked)
}
