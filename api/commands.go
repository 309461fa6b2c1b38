package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
)

// CommandSender sends a command to the commands worker and waits for its
// result; *command.Client is one.
type CommandSender interface {
	// Do publishes cmd and waits for its result until ctx ends. A refusal
	// is a Result whose Error is set; the error is for transport failures
	// and timeouts.
	Do(ctx context.Context, cmd command.Command) (command.Result, error)
}

// ownerUUID returns the caller's owner id as a UUID. Owner ids are UUIDs
// everywhere behind the API, so a token whose sub is something else is
// refused (401) instead of matching nothing.
func ownerUUID(ctx context.Context) (uuid.UUID, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return uuid.Nil, NewKindError(KindUnauthorized, "authentication required")
	}
	id, err := uuid.Parse(p.OwnerID)
	if err != nil {
		return uuid.Nil, NewKindError(KindUnauthorized, "the token's subject (sub) must be a UUID: it is the owner id of every session")
	}
	return id, nil
}

// unavailable is the error of an endpoint whose dependency is not
// configured.
func unavailable(what string) error {
	return huma.Error503ServiceUnavailable(what + " are not available on this server")
}

// commandErrors are the statuses a command endpoint may answer besides
// the ones every secured command has (401, 409, 422, 500).
var commandErrors = []int{http.StatusNotFound, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// queryErrors are the statuses a read endpoint of one session may answer
// besides 401 and 500.
var queryErrors = []int{http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable}

// listErrors are the statuses a list may answer besides 401 and 500.
var listErrors = []int{http.StatusUnprocessableEntity, http.StatusServiceUnavailable}

// send sends the command name on aggregate id for the caller, with the
// request's command id (derived from its Idempotency-Key), waits for the
// result at most Config.CommandTimeout, and returns the new state. A
// refusal is returned as the *command.Error it is (MapError maps it),
// with its field renamed by fields when the domain names it differently
// from the request.
func (s *Server) send(ctx context.Context, aggregate, name string, id uuid.UUID, data any, fields map[string]string) (json.RawMessage, error) {
	if s.deps.Commands == nil {
		return nil, unavailable("commands")
	}
	owner, err := ownerUUID(ctx)
	if err != nil {
		return nil, err
	}
	cmd, err := command.New(aggregate, name, id, owner.String(), data)
	if err != nil {
		return nil, err
	}
	cmd.ID = CommandID(ctx)
	wait, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	res, err := s.deps.Commands.Do(wait, cmd)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// The command is stored and will run: a repeat with the same
		// Idempotency-Key (the same command id) gets its result.
		return nil, huma.NewError(http.StatusGatewayTimeout, fmt.Sprintf(
			"the command was accepted but its result did not arrive within %s; repeat the request with the same Idempotency-Key to get it",
			s.cfg.CommandTimeout))
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		return nil, huma.Error503ServiceUnavailable("the command bus is not available", err)
	}
	if res.Error != nil {
		return nil, renamed(*res.Error, fields)
	}
	return res.State, nil
}

// renamed is a refusal that names its field as the request does, in its
// field and in its message, which the domain starts with the field's name
// ("budget.hardCapUsd: must be greater than 0").
func renamed(refusal command.Error, fields map[string]string) *command.Error {
	f, ok := fields[refusal.Field]
	if !ok {
		return &refusal
	}
	if rest, found := strings.CutPrefix(refusal.Message, refusal.Field+":"); found {
		refusal.Message = f + ":" + rest
	}
	refusal.Field = f
	return &refusal
}

// decodeState reads a command's resulting state.
func decodeState[T any](raw json.RawMessage) (T, error) {
	var v T
	if err := jsonv1.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("api: decode command result: %w", err)
	}
	return v, nil
}
