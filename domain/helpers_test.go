package domain_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

// t0 is the fixed start of every test clock.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

var (
	ownerID   = uuid.MustParse("00000000-0000-4000-8000-000000000001")
	sessionID = uuid.MustParse("00000000-0000-4000-8000-000000000002")
)

// seqIDs returns a deterministic id generator.
func seqIDs() func() uuid.UUID {
	n := uint64(100)
	return func() uuid.UUID {
		n++
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[15-i] = byte(n >> (8 * i))
		}
		b[6], b[8] = 0x40, 0x80
		return uuid.UUID(b)
	}
}

// entropy is a deterministic random source for API keys.
func entropy() *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{7}, 64)) }

func newSessionParams() domain.NewSessionParams {
	return domain.NewSessionParams{
		ID: sessionID, OwnerID: ownerID, WorkingDirectory: "/work/repo",
		Objective: "Add retries to the HTTP client\nwith tests", ModelID: "claude-sonnet-4-6",
		Budget: domain.SessionBudget{HardCapUsd: domain.Dollars(10)}, Now: t0,
	}
}

// newSession returns a new Queued session with an API key.
func newSession(t *testing.T) *domain.AgentSession {
	t.Helper()
	s, err := domain.NewAgentSession(newSessionParams())
	require.NoError(t, err)
	_, err = s.GenerateAPIKey(entropy())
	require.NoError(t, err)
	s.PopEvents()
	return s
}

// runningSession returns a started session with no pending events.
func runningSession(t *testing.T) *domain.AgentSession {
	t.Helper()
	s := newSession(t)
	require.NoError(t, s.Start(t0))
	s.PopEvents()
	return s
}

// snapshotIn returns a consistent stored state of a session in status st:
// the question, plan or pause that status implies is present.
func snapshotIn(t *testing.T, st domain.SessionStatus) domain.AgentSessionSnapshot {
	t.Helper()
	snap := newSession(t).Snapshot()
	snap.Status = st
	if st != domain.StatusQueued {
		started := t0
		snap.StartedAt = &started
	}
	switch st {
	case domain.StatusWaitingForInput:
		snap.PendingQuestion = &domain.UserQuestion{Content: "Which database?", AskedAt: t0, ExpiresAt: t0.Add(domain.DefaultInputTimeout)}
	case domain.StatusWaitingForApproval:
		snap.Plan = &domain.SessionPlan{Content: "1. test 2. code", Status: domain.PlanPendingApproval, RequiresApproval: true, CreatedAt: t0, Version: 1, Submitted: true}
	case domain.StatusPaused:
		p := t0
		snap.PausedAt = &p
	case domain.StatusCompleted, domain.StatusCancelled:
		c := t0
		snap.CompletedAt = &c
	case domain.StatusFailed:
		c := t0
		snap.CompletedAt = &c
		snap.Failure = &domain.Failure{Reason: domain.FailureAgentError}
	}
	return snap
}

func load(t *testing.T, snap domain.AgentSessionSnapshot) *domain.AgentSession {
	t.Helper()
	s, err := domain.UnmarshalAgentSessionFromDatabase(snap)
	require.NoError(t, err)
	return s
}

// eventTypes lists the type names of events.
func eventTypes(events []domain.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventType()
	}
	return out
}

func mustSkill(t *testing.T, id uuid.UUID, name, instructions string, tools ...domain.MCPToolDefinition) *domain.AgentSkill {
	t.Helper()
	s, err := domain.NewAgentSkill(id, ownerID, name, "a skill", instructions, tools, nil, t0)
	require.NoError(t, err)
	s.PopEvents()
	return s
}

func mustTool(t *testing.T, name string) domain.MCPToolDefinition {
	t.Helper()
	d, err := domain.NewMCPToolDefinition(name, "does "+name, `{"type":"object","properties":{"q":{"type":"string"}}}`, "https://mcp.example.com/"+name)
	require.NoError(t, err)
	return d
}

// ackID is the id of the sidecar command a prepared snapshot awaits.
var ackID = uuid.MustParse("00000000-0000-4000-8000-0000000000c1")

// awaiting prepares a snapshot that awaits the ack of cmd under ackID.
func awaiting(cmd domain.SidecarCommand) func(*domain.AgentSessionSnapshot) {
	return func(s *domain.AgentSessionSnapshot) {
		s.AwaitedAcks = []domain.AwaitedAck{{Command: cmd, CommandID: ackID}}
	}
}

// awaited returns the id of the sidecar command of kind cmd the session
// awaits an ack for.
func awaited(t *testing.T, s *domain.AgentSession, cmd domain.SidecarCommand) uuid.UUID {
	t.Helper()
	for _, a := range s.AwaitedAcks() {
		if a.Command == cmd {
			return a.CommandID
		}
	}
	t.Fatalf("the session awaits no %s ack", cmd)
	return uuid.Nil
}
