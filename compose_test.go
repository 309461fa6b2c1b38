package agentbus_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longRunning lists every long-running agentbus component: each needs its
// own service in compose.yaml.
var longRunning = []string{"api", "relay", "worker-commands", "worker-outbox", "worker-acl", "worker-transcript",
	"worker-sidecar-dispatch", "worker-pool", "worker-delivery", "worker-handoff", "worker-notify", "worker-timeouts",
	"worker-autocontinue", "worker-consolidate", "worker-runtime", "worker-webhooks"}

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"}, cli.WithWorkingDirectory("."), cli.WithName("agentbus"))
	require.NoError(t, err)
	project, err := opts.LoadProject(context.Background())
	require.NoError(t, err, "compose.yaml must load as docker compose loads it")
	return project
}

func TestComposeHasEveryComponent(t *testing.T) {
	project := loadCompose(t)
	for _, name := range longRunning {
		t.Run(name, func(t *testing.T) {
			svc, ok := project.Services[name]
			require.True(t, ok, "service %s missing", name)
			require.NotNil(t, svc.HealthCheck, "service %s has no health check", name)
			assert.NotEmpty(t, svc.HealthCheck.Test)
			require.NotNil(t, svc.Build, "service %s must build from the Dockerfile", name)
			for _, key := range []string{"NATS_URL", "NATS_REPLICAS", "DATABASE_URL", "REDIS_URL"} {
				assert.NotNil(t, svc.Environment[key], "service %s needs %s", name, key)
			}
			for _, dep := range []string{"nats-1", "nats-2", "nats-3", "postgres", "redis", "migrate"} {
				assert.Contains(t, svc.DependsOn, dep, "service %s must wait for %s", name, dep)
			}
			// A worker's service is named worker-<name> and runs `agentbus
			// worker <name>`; any other service runs the subcommand of its name.
			want := []string{name}
			if worker, ok := strings.CutPrefix(name, "worker-"); ok {
				want = []string{"worker", worker}
			}
			require.GreaterOrEqual(t, len(svc.Command), len(want), "service %s has no command", name)
			assert.Equal(t, want, []string(svc.Command[:len(want)]), "service %s runs the agentbus subcommand of its name", name)
		})
	}
}

func TestComposeRunsAThreeNodeNatsCluster(t *testing.T) {
	project := loadCompose(t)
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		svc, ok := project.Services[name]
		require.True(t, ok, "service %s missing", name)
		require.NotNil(t, svc.HealthCheck, "%s has no health check", name)
		require.Len(t, svc.Volumes, 2, "%s mounts its configs and its JetStream store", name)
		require.Len(t, svc.Command, 2, name)
		conf, ok := strings.CutPrefix(svc.Command[1], svc.Volumes[0].Target+"/")
		require.True(t, ok, "%s reads its config from the mounted folder", name)
		assert.FileExists(t, filepath.Join(svc.Volumes[0].Source, conf))
		assert.FileExists(t, filepath.Join(svc.Volumes[0].Source, "users.conf"), "the users the config includes")
	}
	for _, name := range []string{"redis", "postgres"} {
		svc, ok := project.Services[name]
		require.True(t, ok, "service %s missing", name)
		assert.NotNil(t, svc.HealthCheck, "%s has no health check", name)
	}
	assert.Contains(t, project.Services["redis"].Command, "--appendonly")
	assert.Equal(t, "3", *project.Services["relay"].Environment["NATS_REPLICAS"])
}

// TestComposeSharesTheWorkspace: the api confines sessions to their
// owners' part of the workspace, the scheduler names scheduled sessions'
// directories in it and the runtime starts the agents there, so all
// three mount the same host directory at /workspace and are told so;
// auto-continue, which holds server credentials, mounts none (the
// sidecars run the validation criteria).
func TestComposeSharesTheWorkspace(t *testing.T) {
	project := loadCompose(t)
	var sources []string
	for _, name := range []string{"api", "worker-scheduler", "worker-runtime"} {
		svc := project.Services[name]
		i := slices.IndexFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == "/workspace" })
		require.GreaterOrEqual(t, i, 0, "%s mounts the workspace", name)
		assert.Equal(t, "/workspace", *svc.Environment["AGENTBUS_WORKSPACE"], name)
		sources = append(sources, svc.Volumes[i].Source)
	}
	assert.Equal(t, sources[0], sources[1], "one workspace for all")
	assert.Equal(t, sources[0], sources[2], "one workspace for all")
	assert.Empty(t, project.Services["worker-autocontinue"].Volumes)
}

// TestComposeConnectsEachComponentAsItsNatsUser: every component connects
// as the user of nats/users.conf named after it, with the password the
// NATS servers are given for that user.
func TestComposeConnectsEachComponentAsItsNatsUser(t *testing.T) {
	project := loadCompose(t)
	natsEnv := project.Services["nats-1"].Environment
	for key, value := range natsEnv {
		if strings.HasPrefix(key, "NATS_PASSWORD_") {
			t.Setenv(key, *value)
		}
	}
	opts, err := server.ProcessConfigFile("nats/cluster/node-1.conf")
	require.NoError(t, err, "the node config loads with the passwords compose gives it")
	passwords := map[string]string{}
	for _, u := range opts.Users {
		passwords[u.Username] = u.Password
	}
	seen := map[string]string{}
	for _, name := range append(longRunning, "worker-scheduler") {
		svc := project.Services[name]
		user := strings.TrimPrefix(name, "worker-")
		require.NotNil(t, svc.Environment["NATS_USER"], "%s connects as a user", name)
		assert.Equal(t, user, *svc.Environment["NATS_USER"], "%s connects as its own user", name)
		require.Contains(t, passwords, user, "nats/users.conf has a user %s", user)
		require.NotNil(t, svc.Environment["NATS_PASSWORD"], name)
		assert.Equal(t, passwords[user], *svc.Environment["NATS_PASSWORD"], "%s has its user's password", name)
		assert.NotContains(t, seen, user, "%s shares its user with %s", name, seen[user])
		seen[user] = name
	}
	assert.Contains(t, passwords, "operator", "a user for people and the nats CLI")
}
