package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// FuzzRequestDecoding sends any body to the command endpoints of people
// and agents, as a client could. Decoding and validation never answer a
// 5xx of their own (503 is the missing command bus of this server), and a
// body with a NUL or invalid UTF-8 in any string is a 422. The seed
// corpus is in testdata/fuzz/FuzzRequestDecoding.
func FuzzRequestDecoding(f *testing.F) {
	srv, err := New(Config{JWTSecret: testSecret, Workspace: workspace.Root(f.TempDir())}, Deps{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	tok, err := NewToken(testSecret, uuid.NewString(), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	session := uuid.NewString()
	paths := []string{
		"/api/agents/sessions",
		"/api/agents/sessions/" + session + "/messages/queue",
		"/api/agents/templates",
		"/api/agents/templates/" + session + "/rules",
		"/api/agents/skills",
		"/api/agents/sessions/" + session + "/answer",
	}
	f.Add(uint8(0), []byte(`{"workingDirectory":"/tmp","objective":"Say hello","budgetCapUsd":5}`))
	f.Add(uint8(1), []byte(`{"content":"Use the standard library","priority":"Immediate"}`))
	f.Add(uint8(2), []byte(`{"name":"Backend","modelId":"m","allowedTools":["Read"],"defaultBudgetCapUsd":10,"schedule":{"cronExpression":"0 9 * * MON","timeZone":"Europe/Lisbon"}}`))
	f.Add(uint8(3), []byte(`{"matchField":"subject","matchPattern":"(?i)invoice","classifyAs":"billing"}`))
	f.Add(uint8(4), []byte(`{"name":"HTTP","description":"Retries","toolDefinitions":[{"name":"t","description":"d","inputSchema":{"type":"object"}}]}`))
	f.Add(uint8(5), []byte(`{"answer":"Postgres"}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if p, err := jsontext.Check(body); err == nil && p != nil && rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("%s %q has %v and got %d", path, body, p, rec.Code)
		}
	})
}
