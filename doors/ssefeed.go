package doors

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus/feed"
)

// SSEFeed follows a session's feed over the HTTP API's live stream
// (GET /api/agents/sessions/{id}/stream), for a door that runs apart from
// the deployment (agentbus socket): the same items, with the same ids.
type SSEFeed struct {
	// Base is the API's base URL, http://host:port.
	Base          string
	Authorization string
	Client        *http.Client
}

// Follow reads the stream, reconnecting with Last-Event-ID when the
// server asks (a slow client) until ctx ends or the API refuses.
func (f SSEFeed) Follow(ctx context.Context, sessionID uuid.UUID, after uint64, deliver func(Item) error) error {
	for {
		again, err := f.follow(ctx, sessionID, &after, deliver)
		if err != nil || !again {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// follow reads one stream; again says the server asked to reconnect.
func (f SSEFeed) follow(ctx context.Context, sessionID uuid.UUID, after *uint64, deliver func(Item) error) (again bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(f.Base, "/")+"/api/agents/sessions/"+sessionID.String()+"/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", f.Authorization)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatUint(*after, 10))
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("doors: the stream of %s answered %s", sessionID, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id uint64
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			id, _ = strconv.ParseUint(strings.TrimSpace(line[3:]), 10, 64)
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[5:], " ")
		case line == "":
			switch {
			case event == "reconnect":
				return true, nil
			case event == "ping" || data == "":
			default:
				it, ok := sseItem(id, event, data)
				if ok {
					if err := deliver(it); err != nil {
						return false, err
					}
					*after = id
				}
			}
			id, event, data = 0, "", ""
		}
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return true, sc.Err()
}

// sseItem reads one SSE event as the JetStream feed gives it.
func sseItem(id uint64, event, data string) (Item, bool) {
	if event == EventDomain {
		var ev struct {
			Type       string          `json:"type"`
			OccurredAt time.Time       `json:"occurredAt"`
			Data       json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			return Item{}, false
		}
		return Item{Seq: id, Event: EventDomain, Type: ev.Type, Data: ev.Data, At: ev.OccurredAt}, true
	}
	for _, k := range feed.Kinds {
		if k == event {
			var at struct {
				OccurredAt time.Time `json:"occurredAt"`
			}
			_ = json.Unmarshal([]byte(data), &at)
			return Item{Seq: id, Event: event, Type: event, Data: json.RawMessage(data), At: at.OccurredAt}, true
		}
	}
	return Item{}, false
}
