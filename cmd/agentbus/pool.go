package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/agentbus/agentbus/domain"
)

// poolMaxFlag adds --pool-max to fs: the pool size of users who set none
// of their own, from AGENTBUS_POOL_MAX by default. The commands worker
// allocates by it and the API reports it, so every process that runs
// either takes it. Read it with poolMax after parsing.
func poolMaxFlag(fs *flag.FlagSet) *string {
	return fs.String("pool-max", os.Getenv("AGENTBUS_POOL_MAX"), fmt.Sprintf(
		"how many of a user's sessions may run at once unless the user set their own size (default $AGENTBUS_POOL_MAX, else %d)",
		domain.DefaultMaxConcurrentSessions))
}

// poolMax reads the value of --pool-max: 0 when unset, which is
// domain.DefaultMaxConcurrentSessions.
func poolMax(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err == nil {
		err = domain.SessionPoolConfig{MaxConcurrentSessions: n}.Validate()
	}
	if err != nil {
		return 0, fmt.Errorf("--pool-max (AGENTBUS_POOL_MAX) %q: want a number from 1 to %d", v, domain.MaxMaxConcurrentSessions)
	}
	return n, nil
}

// sessionPool is the pool of users who set no size of their own.
func (in *infra) sessionPool() (domain.SessionPool, error) {
	return domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: in.PoolMax})
}
