package localsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentbus/agentbus/doors"
)

// typeAuthenticate is the first message of a connection whose peer's uid
// is not mapped to a user: {"type":"authenticate","token":"<bearer token>"}.
const typeAuthenticate = "authenticate"

// authMessage is the authenticate message.
type authMessage struct {
	Type      string `json:"type"`
	Token     string `json:"token"`
	RequestID string `json:"requestId"`
}

// errNotAuthenticated says what the first message must be.
const errNotAuthenticated = `the first message must be {"type":"authenticate","token":"<bearer token>"}: ` +
	`the socket acts for the user of a token, as the HTTP API does, and for no one by default`

// authenticate reads the connection's first line, which must be the
// authenticate message, and verifies its token. Anything else, a token
// the API refuses, or no line within AuthTimeout gets one error line and
// an error: the caller then closes the connection.
func (s *Server) authenticate(ctx context.Context, c net.Conn, r *bufio.Reader, out *writer) (Caller, error) {
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.AuthTimeout))
	var line []byte
	for len(strings.TrimSpace(string(line))) == 0 {
		var size int
		var err error
		line, size, err = readLine(r, s.cfg.MaxMessageBytes)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return Caller{}, refuse(out, "", fmt.Sprintf("no authenticate message within %s; %s", s.cfg.AuthTimeout, errNotAuthenticated))
		}
		if err != nil {
			return Caller{}, err
		}
		if size > s.cfg.MaxMessageBytes {
			return Caller{}, refuse(out, "", errNotAuthenticated)
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	var m authMessage
	if err := json.Unmarshal(line, &m); err != nil || m.Type != typeAuthenticate {
		return Caller{}, refuse(out, m.RequestID, errNotAuthenticated)
	}
	if strings.TrimSpace(m.Token) == "" {
		return Caller{}, refuse(out, m.RequestID, "authenticate needs a token: "+errNotAuthenticated)
	}
	caller, err := s.creds.Token(ctx, strings.TrimSpace(m.Token))
	if err != nil {
		var e *doors.Error
		if !errors.As(err, &e) {
			e = &doors.Error{Kind: doors.KindInternal, Message: "internal error"}
		}
		_ = out.write(errorLine(m.RequestID, e))
		return Caller{}, err
	}
	ok := map[string]any{"type": "authenticated"}
	if m.RequestID != "" {
		ok["requestId"] = m.RequestID
	}
	if caller.UserID != "" {
		ok["userId"] = caller.UserID
	}
	return caller, out.write(ok)
}

// refuse writes an unauthorized error line and returns it as an error.
func refuse(out *writer, requestID, message string) error {
	e := &doors.Error{Kind: doors.KindUnauthorized, Status: http.StatusUnauthorized, Message: message}
	_ = out.write(errorLine(requestID, e))
	return e
}

func errorLine(requestID string, e *doors.Error) map[string]any {
	m := map[string]any{"type": "error", "kind": e.Kind, "message": e.Message}
	if requestID != "" {
		m["requestId"] = requestID
	}
	if e.Status != 0 {
		m["status"] = e.Status
	}
	return m
}
