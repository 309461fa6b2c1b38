package testenv_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestPostgresDatabasesAreFreshAndMigrated(t *testing.T) {
	ctx := context.Background()
	a := testenv.Postgres(t)
	b := testenv.Postgres(t)

	latest, err := migrations.Latest()
	require.NoError(t, err)
	var version int32
	require.NoError(t, a.QueryRow(ctx, "SELECT version FROM "+migrations.VersionTable).Scan(&version))
	assert.Equal(t, latest, version)

	_, err = a.Exec(ctx, "INSERT INTO processed_messages (consumer, message_id) VALUES ('c', 'm')")
	require.NoError(t, err)
	var n int
	require.NoError(t, b.QueryRow(ctx, "SELECT count(*) FROM processed_messages").Scan(&n))
	assert.Zero(t, n, "a second test database must not see the first one's rows")
}

func TestRedisAnswers(t *testing.T) {
	client := testenv.Redis(t)
	require.NoError(t, client.Set(context.Background(), "testenv:k", "v", 0).Err())
	got, err := client.Get(context.Background(), "testenv:k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)
}

func TestPrivateRedisKeepsDataAcrossRestart(t *testing.T) {
	ctx := context.Background()
	srv := testenv.PrivateRedis(t)
	c := testenv.RedisClient(t, srv.URL())
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "agent:session:{x}", Values: map[string]any{"type": "t"}}).Err())
	srv.Stop()
	srv2 := testenv.RestartRedis(t, srv)
	c2 := testenv.RedisClient(t, srv2.URL())
	n, err := c2.XLen(ctx, "agent:session:{x}").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}
