package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// PoolUtilization is how full the caller's session pool is
// (SessionPoolUtilizationDto).
type PoolUtilization struct {
	ActiveCount    int     `json:"activeCount" doc:"Your sessions holding a slot: those with a live agent, neither Queued nor ended." example:"5"`
	MaxCount       int     `json:"maxCount" doc:"How many of your sessions may hold a slot at once." example:"20"`
	AvailableSlots int     `json:"availableSlots" doc:"Free slots." example:"15"`
	Percentage     float64 `json:"percentage" doc:"How full the pool is, in percent." example:"25"`
}

type poolOutput struct {
	Body PoolUtilization
}

// addPoolRoutes registers the pool utilization.
func (s *Server) addPoolRoutes(api huma.API) {
	register(api, humanOp("get-pool", http.MethodGet, "/api/agents/pool", "Get your session pool's utilization",
		"How many of your sessions run at once, out of how many may; Queued sessions wait for a free slot.", "Pool",
		[]int{http.StatusServiceUnavailable}), s.getPool)
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
	return &poolOutput{Body: PoolUtilization{ActiveCount: u.ActiveCount, MaxCount: u.MaxCount,
		AvailableSlots: u.AvailableSlots, Percentage: u.UtilizationPercent}}, nil
}
