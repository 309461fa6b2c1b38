package main

import (
	"fmt"

	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/internal/localserver"
)

// redisUser is an ACL user of up's private Redis: the name, the
// credentials.env variable that holds its URL, and its rules. Its password
// is generated once per data directory (credentials/redis-<name>).
type redisUser struct {
	name, env, rules string
}

// redisUsers are the users of up's private Redis; its default user is off.
// The first is up's own process, whose relay, runtime, launcher and API
// share one client. The others are for deployments that run the components
// separately against this Redis, each with what it needs: the relay reads
// the sessions' streams through consumer groups, acknowledges, trims and
// keeps its cursors (GET/SET/DEL) and learns of new entries from keyspace
// notifications; the runtime and launcher read and write the sessions'
// streams and keys and manage the sidecars' own ACL users (ACL, which is as
// good as admin: keep its URL as close as the first's); the API reads only.
// Commands flagged @dangerous (FLUSHALL, KEYS, CONFIG, DEBUG…) are left out
// of all but the first.
var redisUsers = []redisUser{
	{"agentbus", "REDIS_URL", "~* &* +@all"},
	{"relay", "REDIS_RELAY_URL", "~* &* -@all +@connection +@stream +@read +@pubsub +get +set +del -@dangerous +info"},
	{"runtime", "REDIS_RUNTIME_URL", "~* &* -@all +@connection +@stream +@read +@pubsub +get +set +del +expire -@dangerous +info +acl"},
	{"api", "REDIS_API_URL", "~* -@all +@connection +@read -@dangerous"},
}

// privateRedisUsers returns the users of the private Redis of dataDir,
// with their passwords.
func privateRedisUsers(dataDir string) ([]localserver.RedisUser, error) {
	users := make([]localserver.RedisUser, 0, len(redisUsers))
	for _, u := range redisUsers {
		pw, err := credentials.Password(dataDir, "redis-"+u.name)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		users = append(users, localserver.RedisUser{Name: u.name, Password: pw, Rules: u.rules})
	}
	return users, nil
}
