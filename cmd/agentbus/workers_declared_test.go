package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	natsdefs "github.com/agentbus/agentbus/nats"
)

// notWorkers are the NATS users of components that are not workers: the
// operator, the API and the runners (agentbus runner).
var notWorkers = []string{"operator", "api", "runner"}

// TestWorkersAreDeployed: each declared worker has what running it apart
// needs, as its entry in workers declares it: a file in nats/consumers for
// each consumer it reads, a NATS user allowed to publish exactly on the
// declared subjects (with the JetStream API, its streams' acks and its
// consumers' dead letters), and a compose service that runs it as that
// user. And nothing is deployed that no worker declares.
func TestWorkersAreDeployed(t *testing.T) {
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)
	users := natsUsers(t)
	services := composeServices(t)
	claimed := map[[2]string]string{}
	for _, name := range workerNames() {
		w := workers[name]
		for _, c := range w.consumes {
			assert.NotNil(t, defs.Consumer(c.stream, c.durable), "worker %s: no nats/consumers/%s/%s.json", name, c.stream, c.durable)
			claimed[[2]string{c.stream, c.durable}] = name
		}
		user, ok := users[name]
		if assert.True(t, ok, "worker %s: no user %s in nats/users.conf", name, name) {
			assert.ElementsMatch(t, allowedPublish(w), user.Permissions.Publish.Allow, "worker %s: publish permissions of its NATS user", name)
		}
		assert.True(t, slices.ContainsFunc(services, func(s composetypes.ServiceConfig) bool { return runsWorker(s, name) }),
			"worker %s: no compose service runs it as NATS_USER %s", name, name)
	}
	for stream, cs := range defs.Consumers {
		for _, c := range cs {
			assert.Contains(t, claimed, [2]string{stream, c.Durable}, "nats/consumers/%s/%s.json: no worker reads it", stream, c.Durable)
		}
	}
	for user := range users {
		_, declared := workers[user]
		assert.True(t, declared || slices.Contains(notWorkers, user), "nats/users.conf: user %s is of no worker", user)
	}
	for _, s := range services {
		if len(s.Command) > 1 && s.Command[0] == "worker" {
			assert.Contains(t, workers, s.Command[1], "compose service %s runs an undeclared worker", s.Name)
		}
	}
}

// allowedPublish is what the NATS user of w may publish on.
func allowedPublish(w worker) []string {
	allow := append([]string{"$JS.API.>"}, w.publishes...)
	for _, c := range w.consumes {
		if ack := "$JS.ACK." + c.stream + ".>"; !slices.Contains(allow, ack) {
			allow = append(allow, ack)
		}
	}
	if len(w.consumes) > 0 {
		allow = append(allow, bus.DLQSubject(">"))
	}
	return allow
}

// natsUsers are the users of nats/users.conf, by name.
func natsUsers(t *testing.T) map[string]*server.User {
	t.Helper()
	conf, err := bus.UsersConfig(natsdefs.Users, func(user string) (string, error) { return "secret-" + user, nil })
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "users.conf")
	require.NoError(t, os.WriteFile(file, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(file)
	require.NoError(t, err)
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	require.NotEmpty(t, users)
	return users
}

// composeServices are the services of compose.yaml, loaded as docker
// compose loads them.
func composeServices(t *testing.T) []composetypes.ServiceConfig {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"../../compose.yaml"}, cli.WithWorkingDirectory("../.."), cli.WithName("agentbus"))
	require.NoError(t, err)
	project, err := opts.LoadProject(context.Background())
	require.NoError(t, err)
	services := make([]composetypes.ServiceConfig, 0, len(project.Services))
	for _, s := range project.Services {
		services = append(services, s)
	}
	require.NotEmpty(t, services)
	return services
}

// runsWorker reports whether s runs the named worker (`worker <name>`, or
// the component's own command) as the NATS user of that name.
func runsWorker(s composetypes.ServiceConfig, name string) bool {
	user := s.Environment["NATS_USER"]
	if user == nil || *user != name || len(s.Command) == 0 {
		return false
	}
	return s.Command[0] == name || (len(s.Command) > 1 && s.Command[0] == "worker" && s.Command[1] == name)
}
