package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// sidecarUser is the name of the Redis ACL user of a session's sidecar.
func sidecarUser(sessionID string) string { return "sidecar-" + sessionID }

// sessionRedisURL creates (or resets) the session's own Redis ACL user and
// returns the URL its sidecar connects with. The user reaches only the
// session's keys (agent:session:{<id>}, its command stream, cursor, engine
// id and config) and only with what a sidecar does to them, so a sidecar
// can neither read nor forge another session's streams. A Redis that has
// no ACLs (before 6) or refuses them leaves the shared URL, with an error
// in the log.
func (l *Launcher) sessionRedisURL(ctx context.Context, sessionID string) string {
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		l.log.Error("no Redis user for the sidecar: no randomness", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL
	}
	password := hex.EncodeToString(secret)
	user := sidecarUser(sessionID)
	rules := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password,
		"~" + protocol.EventsKey(sessionID), "~" + protocol.EventsKey(sessionID) + ":*", "resetchannels",
		"-@all", "+xadd", "+xread", "+get", "+set", "+ping", "+hello", "+auth", "+client|setname"}
	// Clients announce themselves with CLIENT SETINFO, which Redis before
	// 7.2 does not know of.
	err := l.cfg.Redis.Do(ctx, append(rules, "+client|setinfo")...).Err()
	if err != nil && strings.Contains(err.Error(), "client|setinfo") {
		err = l.cfg.Redis.Do(ctx, rules...).Err()
	}
	if err != nil {
		l.log.Error("no Redis user for the sidecar: it shares the launcher's access", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL
	}
	u, err := url.Parse(l.cfg.RedisURL)
	if err != nil {
		l.log.Error("no Redis user for the sidecar: unreadable Redis URL", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// dropRedisUser removes the session's Redis user once its sidecar is gone
// for good.
func (l *Launcher) dropRedisUser(ctx context.Context, sessionID string) {
	if err := l.cfg.Redis.Do(ctx, "ACL", "DELUSER", sidecarUser(sessionID)).Err(); err != nil {
		l.log.Warn("Redis user of the sidecar not removed", "session_id", sessionID, "error", err)
	}
}
