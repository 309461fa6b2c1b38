package uptest

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Start starts a session on objective in a new directory of the user's,
// with a budget unless body sets one, and returns its id.
func (c *Client) Start(objective string, body map[string]any) string {
	c.T.Helper()
	if body == nil {
		body = map[string]any{}
	}
	body["objective"] = objective
	if _, ok := body["workingDirectory"]; !ok {
		body["workingDirectory"] = uuid.NewString()[:8]
	}
	if _, ok := body["budgetCapUsd"]; !ok {
		body["budgetCapUsd"] = 5
	}
	var out struct {
		Session Session `json:"session"`
	}
	c.Must(http.MethodPost, "/api/agents/sessions", body, &out)
	require.NotEmpty(c.T, out.Session.ID)
	return out.Session.ID
}

// Post sends the session a command: POST /api/agents/sessions/{id}/{path}.
func (c *Client) Post(id, path string, body any) {
	c.T.Helper()
	c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/"+path, body, nil)
}

// WaitStatus waits until the session is in status.
func (c *Client) WaitStatus(id, status string) Session {
	c.T.Helper()
	return c.WaitFor(id, status, func(s Session) bool { return s.Status == status })
}

// WaitReview waits until the session is Idle with output awaiting review.
func (c *Client) WaitReview(id string) Session {
	c.T.Helper()
	return c.WaitFor(id, "Idle awaiting review", func(s Session) bool { return s.Status == "Idle" && s.HasPendingReview })
}

// WaitActivity waits until the session's activity mentions text.
func (c *Client) WaitActivity(id, text string) {
	c.T.Helper()
	require.Eventually(c.T, func() bool { return strings.Contains(c.Activity(id), text) }, c.Wait, 50*time.Millisecond,
		"the activity of %s never mentioned %q", id, text)
}

// SidecarPID waits until a sidecar runs the session and returns its pid.
func (c *Client) SidecarPID(id string) int {
	c.T.Helper()
	var pid int
	require.Eventually(c.T, func() bool {
		pid = c.SidecarPIDs()[id]
		return pid != 0
	}, c.Wait, 20*time.Millisecond, "no sidecar runs session %s", id)
	return pid
}

// NewSidecarPID waits until a sidecar other than the one of pid runs the
// session and returns its pid.
func (c *Client) NewSidecarPID(id string, pid int) int {
	c.T.Helper()
	var next int
	require.Eventually(c.T, func() bool {
		next = c.SidecarPIDs()[id]
		return next != 0 && next != pid
	}, c.Wait, 20*time.Millisecond, "no new sidecar runs session %s", id)
	return next
}

// CloseAfterCrash is the Close flow once the session's turn runs: its
// sidecar is killed, which cuts the turn short and leaves the session Idle
// with nothing to review; closing it then completes it and stops the
// sidecar it was started again in.
func (c *Client) CloseAfterCrash(id string) {
	c.T.Helper()
	require.NoError(c.T, syscall.Kill(c.SidecarPID(id), syscall.SIGKILL))
	c.WaitFor(id, "Idle without review", func(s Session) bool { return s.Status == "Idle" && !s.HasPendingReview })
	pid := c.SidecarPID(id)
	c.Post(id, "close", nil)
	c.WaitStatus(id, "Completed")
	c.WaitGone(pid)
}

// WaitGone waits until the process of pid is gone.
func (c *Client) WaitGone(pid int) {
	c.T.Helper()
	require.Eventually(c.T, func() bool { return ProcessGone(pid) }, c.Wait, 20*time.Millisecond, "process %d is still there", pid)
}

// ProcessGone reports whether the process of pid is gone (or a zombie).
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(raw), ") Z ")
}

// Permission waits until the session waits on a permission for tool and
// returns the request's id.
func (c *Client) Permission(id, tool string) string {
	c.T.Helper()
	c.WaitStatus(id, "WaitingForApproval")
	var d struct {
		PendingPermission *struct {
			RequestID string `json:"requestId"`
			ToolName  string `json:"toolName"`
		} `json:"pendingPermission"`
	}
	c.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &d)
	require.NotNil(c.T, d.PendingPermission, "session %s waits on no permission", id)
	require.Equal(c.T, tool, d.PendingPermission.ToolName)
	return d.PendingPermission.RequestID
}

// Continuation waits until the session's auto-continue delivered its one
// message to the agent, and returns it.
func (c *Client) Continuation(id string) string {
	c.T.Helper()
	var queue struct {
		Messages []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"messages"`
	}
	require.Eventually(c.T, func() bool {
		c.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages/queue", nil, &queue)
		return len(queue.Messages) == 1 && queue.Messages[0].Status == "Delivered"
	}, c.Wait, 50*time.Millisecond, "no continuation was delivered: %s", c.Activity(id))
	return queue.Messages[0].Content
}

// HandedOff waits until session id ended handed off and a chain goes on
// with its work in a new session with a sidecar of its own; it returns
// that session's id.
func (c *Client) HandedOff(id string) string {
	c.T.Helper()
	c.WaitStatus(id, "ContextExhausted")
	var chain struct {
		CurrentSessionID string `json:"currentSessionId"`
		Sessions         []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	require.Eventually(c.T, func() bool {
		var list struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		c.Must(http.MethodGet, "/api/agents/chains", nil, &list)
		for _, it := range list.Items {
			c.Must(http.MethodGet, "/api/agents/chains/"+it.ID, nil, &chain)
			if len(chain.Sessions) == 2 && chain.Sessions[0].SessionID == id {
				return true
			}
		}
		return false
	}, c.Wait, 100*time.Millisecond, "no chain continues session %s", id)
	next := chain.CurrentSessionID
	require.NotEqual(c.T, id, next)
	c.WaitFor(next, "the continuation at work", func(s Session) bool { return s.Status == "Running" || s.Status == "Idle" })
	c.SidecarPID(next)
	return next
}
