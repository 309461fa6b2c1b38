package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// PoolUtilization is how full the caller's session pool is
// (SessionPoolUtilizationDto).
type PoolUtilization struct {
	ActiveCount    int     `json:"activeCount" doc:"Your sessions holding a slot: those with a live agent, neither Queued nor ended." example:"5"`
	MaxCount       int     `json:"maxCount" doc:"How many of your sessions may hold a slot at once." example:"20"`
	AvailableSlots int     `json:"availableSlots" doc:"Free slots." example:"15"`
	Percentage     float64 `json:"percentage" doc:"How full the pool is, in percent." example:"25"`
}

// PoolConfig sets the size of the caller's session pool (SessionPoolConfig).
type PoolConfig struct {
	MaxConcurrentSessions int `json:"maxConcurrentSessions" minimum:"1" maximum:"10000" doc:"How many of your sessions may hold a slot at once. Raising it starts Queued sessions at once; lowering it stops no running session." example:"5"`
}

type poolOutput struct {
	Body PoolUtilization
}

type configurePoolInput struct {
	Body PoolConfig
}

// addPoolRoutes registers the pool utilization and the pool's size.
func (s *Server) addPoolRoutes(api huma.API) {
	register(api, humanOp("get-pool", http.MethodGet, "/api/agents/pool", "Get your session pool's utilization",
		"How many of your sessions run at once, out of how many may; Queued sessions wait for a free slot.", "Pool",
		[]int{http.StatusServiceUnavailable}), s.getPool)
	register(api, humanOp("configure-pool", http.MethodPut, "/api/agents/pool", "Set your session pool's size",
		"How many of your sessions may hold a slot at once. Raising it starts your oldest Queued sessions in the new slots; "+
			"lowering it stops no running session, and Queued ones wait until fewer than the new size run.", "Pool",
		commandErrors), s.configurePool)
}

func (s *Server) getPool(ctx context.Context, _ *struct{}) (*poolOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.deps.Queries.PoolUtilization(ctx, owner)
	if err != nil {
		return nil, err
	}
	return &poolOutput{Body: utilizationOf(u)}, nil
}

func (s *Server) configurePool(ctx context.Context, in *configurePoolInput) (*poolOutput, error) {
	owner, err := ownerUUID(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, command.PoolAggregate, command.ConfigurePool, owner,
		domain.SessionPoolConfig{MaxConcurrentSessions: in.Body.MaxConcurrentSessions},
		map[string]string{"maxConcurrentSessions": "body.maxConcurrentSessions"})
	if err != nil {
		return nil, err
	}
	u, err := decodeState[domain.SessionPoolUtilization](raw)
	if err != nil {
		return nil, err
	}
	return &poolOutput{Body: utilizationOf(u)}, nil
}

func utilizationOf(u domain.SessionPoolUtilization) PoolUtilization {
	return PoolUtilization{ActiveCount: u.ActiveCount, MaxCount: u.MaxCount,
		AvailableSlots: u.AvailableSlots, Percentage: u.UtilizationPercent}
}
