package agentbus_test

import (
	"context"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longRunning lists every long-running agentbus component: each needs its
// own service in compose.yaml.
var longRunning = []string{"api", "relay", "worker-commands", "worker-outbox", "worker-acl", "worker-transcript",
	"worker-sidecar-dispatch", "worker-pool", "worker-delivery", "worker-handoff", "worker-notify", "worker-timeouts",
	"worker-autocontinue", "worker-consolidate", "worker-runtime"}

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
		require.Len(t, svc.Volumes, 2, "%s mounts its config and its JetStream store", name)
		assert.FileExists(t, svc.Volumes[0].Source)
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
		require.Len(t, svc.Volumes, 1, name)
		assert.Equal(t, "/workspace", svc.Volumes[0].Target, name)
		assert.Equal(t, "/workspace", *svc.Environment["AGENTBUS_WORKSPACE"], name)
		sources = append(sources, svc.Volumes[0].Source)
	}
	assert.Equal(t, sources[0], sources[1], "one workspace for all")
	assert.Equal(t, sources[0], sources[2], "one workspace for all")
	assert.Empty(t, project.Services["worker-autocontinue"].Volumes)
}
