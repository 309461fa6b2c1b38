package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Event is one Server-Sent Event of a live stream. Name is the SSE event
// name (event, assistant_text, tool_call, tool_result, activity,
// text_delta); ID is its resumable position.
type Event struct {
	ID   string
	Name string
	Data json.RawMessage
}

// StreamEvent is the data of an `event`: one domain event.
type StreamEvent struct {
	Type        string          `json:"type"`
	Aggregate   string          `json:"aggregate"`
	AggregateID string          `json:"aggregateId"`
	Version     int64           `json:"version"`
	OccurredAt  time.Time       `json:"occurredAt"`
	Data        json.RawMessage `json:"data"`
}

// Follow says where a live stream starts and how it survives a lost
// connection.
type Follow struct {
	// LastEventID resumes after this event; empty starts at Since.
	LastEventID string
	// Since is where a stream without LastEventID starts: "0" from the
	// beginning, an RFC 3339 time, or empty for new events only.
	Since string
	// RetryFor is how long reconnecting goes on after the stream was
	// lost before Follow gives up; zero is two minutes.
	RetryFor time.Duration
	// Idle is how long a stream may stay silent, heartbeats included,
	// before it is taken for lost; zero is one minute (the API sends a
	// heartbeat every 15 seconds by default).
	Idle time.Duration
	// Lost, when set, is told each time the stream was lost and is about
	// to be resumed after lastEventID.
	Lost func(lastEventID string, err error)
}

// errStop ends a stream at the handler's request.
var errStop = errors.New("stop")

// Stop is returned by a stream handler to end the stream without error.
func Stop() error { return errStop }

// FollowSession reads the live stream of a session and calls handle for
// each event but the heartbeats and the server's reconnect requests, in
// order. When the connection is lost, or the server asks the client to
// reconnect, it resumes after the last event received, with
// Last-Event-ID, so handle sees every event once. It returns when
// handle returns an error (nil for Stop), when ctx ends (nil), or when
// the API refuses the stream or stays unreachable for f.RetryFor.
func (c *Client) FollowSession(ctx context.Context, id string, f Follow, handle func(Event) error) error {
	retryFor := f.RetryFor
	if retryFor <= 0 {
		retryFor = 2 * time.Minute
	}
	idle := f.Idle
	if idle <= 0 {
		idle = time.Minute
	}
	fl := &follower{last: f.LastEventID, handle: handle}
	backoff := 100 * time.Millisecond
	var lostSince time.Time
	for {
		opened, err := c.readStream(ctx, sessionPath(id, "stream"), fl.last, f.Since, idle, fl.event)
		over, err := streamEnd(ctx, err)
		if over {
			return err
		}
		if opened {
			lostSince, backoff = time.Time{}, 100*time.Millisecond
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		} else if time.Since(lostSince) > retryFor {
			return fmt.Errorf("the live stream was lost for %s: %w", retryFor.Round(time.Second), err)
		}
		if f.Lost != nil {
			f.Lost(fl.last, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// follower hands a followed stream's events to its handler, and keeps the
// id of the last one to resume after.
type follower struct {
	last   string
	handle func(Event) error
}

// event takes one event of the stream: heartbeats are dropped, and the
// server's reconnect request ends the connection.
func (fl *follower) event(ev Event) error {
	if ev.ID != "" {
		fl.last = ev.ID
	}
	switch ev.Name {
	case "ping":
		return nil
	case "reconnect":
		var r struct {
			LastEventID string `json:"lastEventId"`
		}
		if json.Unmarshal(ev.Data, &r) == nil && r.LastEventID != "" {
			fl.last = r.LastEventID
		}
		return errReconnect
	}
	return fl.handle(ev)
}

// streamEnd tells a stream that is over for good, with what FollowSession
// returns, from a stream that was lost, with why.
func streamEnd(ctx context.Context, err error) (over bool, result error) {
	switch {
	case errors.Is(err, errStop), ctx.Err() != nil:
		return true, nil
	case err == nil, errors.Is(err, errReconnect):
		return false, io.ErrUnexpectedEOF
	}
	var p *Problem
	if errors.As(err, &p) && p.Status < 500 && p.Status != http.StatusTooManyRequests {
		return true, err // the API refuses this stream: trying again changes nothing
	}
	var he *handlerError
	if errors.As(err, &he) {
		return true, he.err
	}
	return false, err
}

var errReconnect = errors.New("the server asked to reconnect")

// handlerError carries an error of the handler out of readStream, so it
// is told apart from a lost connection.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// readStream opens one connection to an SSE endpoint and reads it until
// it ends. opened tells whether the API accepted the stream.
func (c *Client) readStream(ctx context.Context, path, last, since string, idle time.Duration, handle func(Event) error) (opened bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if last == "" && since != "" {
		path += "?since=" + url.QueryEscape(since)
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	// A silent connection is a lost one: the server sends heartbeats.
	watchdog := time.AfterFunc(idle, func() { cancel(fmt.Errorf("no heartbeat for %s", idle)) })
	defer watchdog.Stop()
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		return false, fmt.Errorf("cannot reach the API at %s: %w", c.Base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return false, errorOf(resp, raw)
	}
	err = readEvents(resp.Body, func(ev Event) error {
		watchdog.Reset(idle)
		if err := handle(ev); err != nil {
			if errors.Is(err, errStop) || errors.Is(err, errReconnect) {
				return err
			}
			return &handlerError{err}
		}
		return nil
	})
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return true, err
}

// readEvents parses a text/event-stream body (the WHATWG HTML standard's
// format: fields, one per line, events ended by a blank line) and calls
// handle for each event with data. It returns nil at the end of the body.
func readEvents(r io.Reader, handle func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				if ev.Name == "" {
					ev.Name = "message"
				}
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if err := handle(ev); err != nil {
					return err
				}
			}
			ev, data = Event{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}
