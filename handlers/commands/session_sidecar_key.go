package commands

import (
	"context"
	"crypto/rand"

	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

func registerSidecarKey(d *Dispatcher) {
	d.Register(domain.AggregateSession, command.IssueSidecarKey, issueSidecarKey)
}

// issueSidecarKey replaces the session's sidecar key with a new one and
// hands the plaintext to the live caller only.
func issueSidecarKey(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
	if cmd.OwnerID != "" {
		// A person never needs the sidecar's key: theirs came with the session.
		return nil, notOwner{"session"}
	}
	data, err := decode[command.IssueSidecarKeyData](cmd)
	if err != nil {
		return nil, err
	}
	var key string
	_, err = sessions.Update(ctx, tx, cmd.AggregateID, func(s *domain.AgentSession) error {
		var err error
		key, err = s.IssueSidecarKey(rand.Reader, data.Engine)
		return err
	})
	if err != nil {
		return nil, err
	}
	return WithSecret{State: command.IssueSidecarKeyResult{}, Secret: command.IssueSidecarKeyResult{APIKey: key}}, nil
}
