package command

// PoolAggregate is the aggregate of a user's session pool on
// agents.cmd.pool.<command>; the command's aggregateId is the user's id.
const PoolAggregate = "pool"

// ConfigurePool sets how many of the caller's sessions may hold a slot at
// once (data: domain.SessionPoolConfig). A larger pool starts Queued
// sessions at once; a smaller one stops none. The result is the pool's
// domain.SessionPoolUtilization.
const ConfigurePool = "configure_pool"
