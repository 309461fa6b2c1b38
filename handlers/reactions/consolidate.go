package reactions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// ConsolidateConsumer is the durable consumer of the consolidation
// reaction. Renaming it replays every event to it: keep it stable.
const ConsolidateConsumer = "consolidate"

// errNoOutput is returned while the transcript holds no text of the agent:
// the event is redelivered until the transcript projection has caught up.
var errNoOutput = errors.New("the session's transcript holds no text of the agent yet")

// Consolidate is the completion handler of consolidation sessions (seed
// 001 StartSkillConsolidationCommand): when the output of a consolidation
// session is approved, the agent's last message (the complete new
// instructions it was asked to deliver) replaces the skill's instructions,
// the pills it was given that are still Active are marked Consolidated, and
// the skill's version goes up by one (ConsolidateSkillCommand).
//
// The command's id is derived from the approval event, so a redelivered
// event repeats a command that changes nothing.
type Consolidate struct {
	JS     jetstream.JetStream
	DB     *pgxpool.Pool
	Client *command.Client
}

// Run consumes session approvals until ctx ends.
func (c Consolidate) Run(ctx context.Context) error {
	return bus.Run(ctx, c.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: ConsolidateConsumer, Handler: c.Handle,
		Concurrency: 2, FilterSubjects: []string{bus.EventFilter(domain.AgentSessionApprovedEvent{})},
	})
}

// Handle consolidates the skill of one approved consolidation session; an
// approval of any other session changes nothing.
func (c Consolidate) Handle(ctx context.Context, m jetstream.Msg) error {
	env, sessionID, err := decodeEvent(m)
	if err != nil {
		return err
	}
	job, ok, err := postgres.ConsolidationOf(ctx, c.DB, sessionID)
	if err != nil || !ok {
		return err
	}
	instructions, err := c.lastAgentText(ctx, sessionID)
	if err != nil {
		return err
	}
	skill, err := postgres.Skills{}.Get(ctx, c.DB, job.SkillID)
	if err != nil {
		return notFoundIsFinal(err)
	}
	// A pill dismissed since the session started is left alone.
	var pills []uuid.UUID
	for _, p := range skill.MemoryPills() {
		if p.Status == domain.PillActive && slices.Contains(job.PillIDs, p.ID) {
			pills = append(pills, p.ID)
		}
	}
	if len(pills) == 0 {
		slog.Info("nothing left to consolidate", "component", "consolidate", "session_id", sessionID, "skill_id", job.SkillID)
		return nil
	}
	_, err = doDerived(ctx, c.Client, "consolidate", "consolidate/"+env.ID, domain.AggregateSkill, command.ConsolidateSkill,
		job.SkillID, "", command.ConsolidateSkillData{PillIDs: pills, UpdatedInstructions: instructions})
	return err
}

// lastAgentText is the session's last message of its own agent (not of a
// subagent), from the transcript.
func (c Consolidate) lastAgentText(ctx context.Context, sessionID uuid.UUID) (string, error) {
	text, err := queries.LastAgentText(ctx, c.DB, sessionID)
	if errors.Is(err, queries.ErrNotFound) {
		return "", fmt.Errorf("session %s: %w", sessionID, errNoOutput)
	}
	return text, err
}
