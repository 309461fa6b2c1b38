package launcher

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// PlaceRedisUser makes or resets the session's Redis user (the rules of a
// sidecar's user) with a fresh password, for a sidecar that a runner
// starts, and returns the URL it connects with. With fence set it also
// closes every connection the user has: a sidecar of the session still
// running on a runner given up on is refused from then on, by its
// connections and by any it makes again, so two sidecars of one session
// never write at once.
func PlaceRedisUser(ctx context.Context, rdb *redis.Client, baseURL, sessionID string, fence bool) (string, error) {
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	password := hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(password))
	l := &Launcher{cfg: Config{Redis: rdb}}
	if err := l.setRedisUser(ctx, sessionID, hex.EncodeToString(sum[:])); err != nil {
		return "", fmt.Errorf("launcher: Redis user of %s: %w", sessionID, err)
	}
	if fence {
		if err := rdb.Do(ctx, "CLIENT", "KILL", "USER", sidecarUser(sessionID)).Err(); err != nil {
			return "", fmt.Errorf("launcher: close the Redis connections of %s: %w", sessionID, err)
		}
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("launcher: unreadable Redis URL: %w", err)
	}
	u.User = url.UserPassword(sidecarUser(sessionID), password)
	return u.String(), nil
}

// FenceRedisUser sets a password nobody knows on the session's Redis user
// and closes its connections: no sidecar of the session writes until the
// next PlaceRedisUser.
func FenceRedisUser(ctx context.Context, rdb *redis.Client, sessionID string) error {
	_, err := PlaceRedisUser(ctx, rdb, "redis://localhost", sessionID, true)
	return err
}

// DropRedisUser removes the session's Redis user, once it is over.
func DropRedisUser(ctx context.Context, rdb *redis.Client, sessionID string) error {
	return rdb.Do(ctx, "ACL", "DELUSER", sidecarUser(sessionID)).Err()
}

// RecordsKey is the Redis hash where the launcher named name records the
// sidecars it runs, by session id.
func RecordsKey(name string) string { return "agentbus:launcher:" + name + ":sidecars" }
