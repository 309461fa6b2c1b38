package launcher

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"time"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// sidecarUser is the name of the Redis ACL user of a session's sidecar.
func sidecarUser(sessionID string) string { return "sidecar-" + sessionID }

// sessionRedisURL creates (or resets) the session's own Redis ACL user and
// returns the URL its sidecar connects with, and the SHA-256 of its
// password, which the launcher keeps to restore the user (see
// keepRedisUsers). The user reaches only the session's keys
// (agent:session:{<id>}, its command stream, cursor, engine id and config)
// and only with what a sidecar does to them, so a sidecar can neither read
// nor forge another session's streams. A Redis that has no ACLs (before 6)
// or refuses them leaves the shared URL, with an error in the log.
func (l *Launcher) sessionRedisURL(ctx context.Context, sessionID string) (redisURL, passwordHash string) {
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		l.log.Error("no Redis user for the sidecar: no randomness", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL, ""
	}
	password := hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(password))
	passwordHash = hex.EncodeToString(sum[:])
	if err := l.setRedisUser(ctx, sessionID, passwordHash); err != nil {
		l.log.Error("no Redis user for the sidecar: it shares the launcher's access", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL, ""
	}
	u, err := url.Parse(l.cfg.RedisURL)
	if err != nil {
		l.log.Error("no Redis user for the sidecar: unreadable Redis URL", "session_id", sessionID, "error", err)
		return l.cfg.RedisURL, ""
	}
	u.User = url.UserPassword(sidecarUser(sessionID), password)
	return u.String(), passwordHash
}

// setRedisUser creates or resets the session's user with the password
// whose SHA-256 is passwordHash.
func (l *Launcher) setRedisUser(ctx context.Context, sessionID, passwordHash string) error {
	rules := []any{"ACL", "SETUSER", sidecarUser(sessionID), "reset", "on", "#" + passwordHash,
		"~" + protocol.EventsKey(sessionID), "~" + protocol.EventsKey(sessionID) + ":*", "resetchannels",
		"-@all", "+xadd", "+xread", "+get", "+set", "+ping", "+hello", "+auth", "+client|setname"}
	// Clients announce themselves with CLIENT SETINFO, which Redis before
	// 7.2 does not know of.
	err := l.cfg.Redis.Do(ctx, append(rules, "+client|setinfo")...).Err()
	if err != nil && strings.Contains(err.Error(), "client|setinfo") {
		err = l.cfg.Redis.Do(ctx, rules...).Err()
	}
	return err
}

// keepRedisUsers restores the Redis users of the running sidecars until
// the launcher closes. Redis keeps ACL users in memory only: a restarted
// Redis has its data back from the append-only file, but not the users,
// and every sidecar would be refused from then on.
func (l *Launcher) keepRedisUsers() {
	defer l.wg.Done()
	tick := time.NewTicker(2 * l.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
			l.restoreRedisUsers(l.ctx)
		}
	}
}

// restoreRedisUsers creates again the users of running sidecars that
// Redis does not know (any more).
func (l *Launcher) restoreRedisUsers(ctx context.Context) {
	l.mu.Lock()
	want := map[string]string{}
	for id, p := range l.running {
		if p.rec.RedisPasswordSHA256 != "" && !p.stopping {
			want[id] = p.rec.RedisPasswordSHA256
		}
	}
	l.mu.Unlock()
	if len(want) == 0 {
		return
	}
	users, err := l.cfg.Redis.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return // Redis is down: the next round sees it back
	}
	known := map[string]bool{}
	for _, u := range users {
		known[u] = true
	}
	for id, hash := range want {
		if known[sidecarUser(id)] {
			continue
		}
		if err := l.setRedisUser(ctx, id, hash); err != nil {
			l.log.Warn("Redis user of the sidecar not restored", "session_id", id, "error", err)
			continue
		}
		l.log.Warn("Redis user of the sidecar restored: Redis had lost it", "session_id", id)
	}
}

// dropRedisUser removes the session's Redis user once its sidecar is gone
// for good.
func (l *Launcher) dropRedisUser(ctx context.Context, sessionID string) {
	if err := l.cfg.Redis.Do(ctx, "ACL", "DELUSER", sidecarUser(sessionID)).Err(); err != nil {
		l.log.Warn("Redis user of the sidecar not removed", "session_id", sessionID, "error", err)
	}
}
