// Package uptest drives a running agentbus deployment the way its users
// do, over the HTTP API, and reads which sidecar processes its runtime
// keeps, for the end-to-end tests of `up` and its real runtime.
package uptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/credentials"
)

// Client talks to one deployment as one user.
type Client struct {
	T     testing.TB
	Base  string        // the API's base URL, http://host:port
	Token string        // the user's bearer token
	Redis *redis.Client // the deployment's Redis, for the runtime's records
	// Wait bounds every wait for the system; generous, since the race
	// detector and real processes share two cores.
	Wait time.Duration
}

// As is a client of the same deployment for the test t, signed in as
// owner with a token that secret signs.
func (c *Client) As(t testing.TB, secret, owner string) *Client {
	t.Helper()
	token, err := api.NewToken(secret, owner, time.Hour)
	require.NoError(t, err)
	return &Client{T: t, Base: c.Base, Token: token, Redis: c.Redis, Wait: c.Wait}
}

// Session is what the tests read of a session.
type Session struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	HasPendingReview bool   `json:"hasPendingReview"`
	Runner           string `json:"runner"`
	Metrics          struct {
		TurnCount int `json:"turnCount"`
	} `json:"metrics"`
}

// Call sends a request and decodes the answer into out (when not nil); it
// returns the status code.
func (c *Client) Call(method, path string, body, out any) int {
	c.T.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(c.T, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.Base+path, r)
	require.NoError(c.T, err)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.T, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.T, err)
	if out != nil && len(raw) > 0 {
		require.NoError(c.T, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
	return resp.StatusCode
}

// Must sends a request that must succeed.
func (c *Client) Must(method, path string, body, out any) {
	c.T.Helper()
	var raw json.RawMessage
	code := c.Call(method, path, body, &raw)
	require.Less(c.T, code, 300, "%s %s answered %d: %s", method, path, code, raw)
	if out != nil && len(raw) > 0 {
		require.NoError(c.T, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
}

// Session reads a session.
func (c *Client) Session(id string) Session {
	c.T.Helper()
	var s Session
	c.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &s)
	return s
}

// WaitFor waits until the session satisfies ok.
func (c *Client) WaitFor(id, what string, ok func(Session) bool) Session {
	c.T.Helper()
	deadline := time.Now().Add(c.Wait)
	for {
		s := c.Session(id)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("session %s is %+v, not %s; activity: %s", id, s, what, c.Activity(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Activity returns the session's activity, as the API answers it.
func (c *Client) Activity(id string) string {
	var raw json.RawMessage
	c.Call(http.MethodGet, "/api/agents/sessions/"+id+"/activity?limit=100", nil, &raw)
	return string(raw)
}

// Enqueue sends the session a message and returns its id.
func (c *Client) Enqueue(id, content, priority string) string {
	c.T.Helper()
	var out struct {
		MessageID string `json:"messageId"`
	}
	c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/messages/queue", map[string]any{"content": content, "priority": priority}, &out)
	return out.MessageID
}

// WaitDelivered waits until the agent took the message.
func (c *Client) WaitDelivered(id, messageID string) {
	c.T.Helper()
	deadline := time.Now().Add(c.Wait)
	for {
		var q struct {
			Messages []struct {
				MessageID string `json:"messageId"`
				Status    string `json:"status"`
			} `json:"messages"`
		}
		c.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages/queue", nil, &q)
		for _, m := range q.Messages {
			if m.MessageID == messageID && m.Status == "Delivered" {
				return
			}
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("message %s of session %s not delivered: %+v; session %+v", messageID, id, q.Messages, c.Session(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FollowUp sends a message and waits until the agent took it and the
// turn that answers it ended with output awaiting review.
func (c *Client) FollowUp(id, content, priority string) {
	c.T.Helper()
	before := c.Session(id).Metrics.TurnCount
	c.WaitDelivered(id, c.Enqueue(id, content, priority))
	c.WaitFor(id, "Idle awaiting review after the follow-up's turn", func(s Session) bool {
		return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount > before
	})
}

// SidecarPIDs returns the pid of each running sidecar the runtime records.
func (c *Client) SidecarPIDs() map[string]int {
	c.T.Helper()
	host, err := os.Hostname()
	require.NoError(c.T, err)
	recs, err := c.Redis.HGetAll(context.Background(), "agentbus:launcher:"+host+":sidecars").Result()
	require.NoError(c.T, err)
	out := map[string]int{}
	for id, raw := range recs {
		var rec struct {
			PID    int  `json:"pid"`
			Exited bool `json:"exited"`
		}
		require.NoError(c.T, json.Unmarshal([]byte(raw), &rec))
		if !rec.Exited {
			out[id] = rec.PID
		}
	}
	return out
}

// ProcessesNaming returns the pids whose command line holds s.
func ProcessesNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(raw), s) {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcessesNamingIn returns the processes of ProcessesNaming(s) that work
// in dir or below it: those of one deployment, when other tests run the
// same programs at the same time.
func ProcessesNamingIn(s, dir string) []int {
	var pids []int
	for _, pid := range ProcessesNaming(s) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Credentials reads the credentials.env that `agentbus up` wrote in its
// data directory: the URLs, with their passwords, of its servers.
func Credentials(t testing.TB, dataDir string) map[string]string {
	t.Helper()
	env, err := credentials.ReadEnv(dataDir)
	require.NoError(t, err, "the credentials of up's data directory")
	return env
}

// RedisOf returns a client of the Redis of the `up` of dataDir, logged in
// with the credentials it wrote there; closed when the test ends.
func RedisOf(t testing.TB, dataDir string, poolSize int) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(Credentials(t, dataDir)["REDIS_URL"])
	require.NoError(t, err)
	if poolSize > 0 {
		opts.PoolSize = poolSize
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// DirFiles returns the files under dir and their contents; none when dir
// is not there.
func DirFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(raw)
		return err
	})
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return out
}
