package nats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
)

// componentUsers are the users of nats/users.conf, by the environment
// variable suffix of their password.
var componentUsers = map[string]string{
	"operator": "OPERATOR", "api": "API", "relay": "RELAY", "commands": "COMMANDS", "outbox": "OUTBOX",
	"acl": "ACL", "transcript": "TRANSCRIPT", "sidecar-dispatch": "SIDECAR_DISPATCH", "delivery": "DELIVERY",
	"pool": "POOL", "handoff": "HANDOFF", "consolidate": "CONSOLIDATE", "autocontinue": "AUTOCONTINUE",
	"timeouts": "TIMEOUTS", "scheduler": "SCHEDULER", "notify": "NOTIFY", "runtime": "RUNTIME",
	"webhooks": "WEBHOOKS", "runner": "RUNNER",
}

func password(user string) string { return "secret-" + strings.ToLower(componentUsers[user]) }

// setPasswords gives every user of users.conf its password, as the
// server reads them from its environment.
func setPasswords(t *testing.T) {
	t.Helper()
	for user, env := range componentUsers {
		t.Setenv("NATS_PASSWORD_"+env, password(user))
	}
}

// startWithUsers runs nats-server from server.conf (and so users.conf) on a
// free port with its store in a temporary directory.
func startWithUsers(t *testing.T) *server.Server {
	t.Helper()
	setPasswords(t)
	opts, err := server.ProcessConfigFile("server.conf")
	require.NoError(t, err)
	opts.Port, opts.HTTPPort = -1, 0
	opts.StoreDir = t.TempDir()
	opts.SyncAlways = false
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second), "nats-server ready")
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// conn is a connection of one user that records the permission
// violations the server reports to it.
type conn struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	mu         sync.Mutex
	violations []string
}

func connectAs(t *testing.T, srv *server.Server, user string) *conn {
	t.Helper()
	c := &conn{}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, password(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.mu.Lock()
				c.violations = append(c.violations, err.Error())
				c.mu.Unlock()
			}
		}))
	require.NoError(t, err, "connect as %s", user)
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return c
}

// refused says whether the server reported a publish permission violation
// on subject to this connection.
func (c *conn) refused(subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		if strings.Contains(v, "Publish") && strings.Contains(v, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// publish publishes to a stream and returns the error of the publish.
func (c *conn) publish(t *testing.T, subject string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.js.Publish(ctx, subject, []byte(`{}`))
	return err
}

func TestUsersConnectWithTheirPasswordOnly(t *testing.T) {
	srv := startWithUsers(t)
	_, err := nats.Connect(srv.ClientURL())
	require.Error(t, err, "no anonymous connection")
	assert.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(srv.ClientURL(), nats.UserInfo("relay", password("api")))
	require.Error(t, err, "a user with another's password")
	assert.ErrorIs(t, err, nats.ErrAuthorization)
}

func TestUsersPublishOnlyOnTheirSubjects(t *testing.T) {
	srv := startWithUsers(t)
	op := connectAs(t, srv, "operator")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, bus.Provision(ctx, op.js))
	for _, bucket := range []string{"runners", "runner_assignments"} {
		_, err := op.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
		require.NoError(t, err)
	}

	const s = "0b5e0000-0000-4000-8000-000000000001"
	cases := []struct {
		user    string
		own     []string
		others  []string
		consume string // a stream whose messages it acks
	}{
		{"api", []string{"agents.cmd.session.pause"},
			[]string{"agents.evt.session." + s + ".session_paused", "agents.sidecar." + s + ".events.assistant"}, ""},
		{"relay", []string{"agents.sidecar." + s + ".events.assistant"},
			[]string{"agents.sidecar." + s + ".commands.pause", "agents.cmd.session.pause", "agents.evt.session." + s + ".session_failed"}, bus.StreamSidecarCommands},
		{"outbox", []string{"agents.evt.session." + s + ".session_paused"},
			[]string{"agents.cmd.session.pause", "agents.sidecar." + s + ".events.assistant"}, ""},
		{"acl", []string{"agents.cmd.session.pause", "agents.evt.activity." + s + ".item"},
			[]string{"agents.evt.session." + s + ".session_failed", "agents.sidecar." + s + ".commands.pause"}, bus.StreamSidecarEvents},
		{"transcript", nil,
			[]string{"agents.cmd.session.pause", "agents.evt.session." + s + ".session_failed"}, bus.StreamSidecarEvents},
		{"sidecar-dispatch", []string{"agents.sidecar." + s + ".commands.pause"},
			[]string{"agents.sidecar." + s + ".events.assistant", "agents.cmd.session.pause"}, bus.StreamEvents},
		{"delivery", []string{"agents.sidecar." + s + ".commands.message"},
			[]string{"agents.sidecar." + s + ".events.assistant", "agents.evt.session." + s + ".session_failed"}, bus.StreamEvents},
		{"notify", []string{"agents.evt.notification.owner1.session_completed"},
			[]string{"agents.evt.session." + s + ".session_failed", "agents.cmd.session.pause"}, bus.StreamEvents},
		{"webhooks", nil,
			[]string{"agents.evt.session." + s + ".session_failed", "agents.cmd.session.pause", "agents.evt.notification.owner1.x"}, bus.StreamEvents},
		{"pool", []string{"agents.cmd.session.allocate"},
			[]string{"agents.evt.session." + s + ".session_allocated", "agents.sidecar." + s + ".commands.start"}, bus.StreamEvents},
		{"runner", []string{"$KV.runners.host-a", "$KV.runner_assignments." + s},
			[]string{"agents.cmd.session.pause", "agents.sidecar." + s + ".events.assistant", "agents.evt.session." + s + ".session_failed"}, ""},
		{"runtime", []string{"agents.cmd.session.start_failed", "$KV.runner_assignments." + s},
			[]string{"agents.sidecar." + s + ".events.assistant", "agents.evt.session." + s + ".session_failed"}, bus.StreamEvents},
		{"commands", []string{"agents.evt.session." + s + ".session_paused", "agents.sidecar." + s + ".commands.steering_message"},
			[]string{"agents.evt.activity." + s + ".item", "agents.cmd.session.pause", "agents.sidecar." + s + ".commands.pause"}, bus.StreamCommands},
	}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			c := connectAs(t, srv, tc.user)
			for _, subject := range tc.own {
				require.NoError(t, c.publish(t, subject), "%s publishes on its own subject %s", tc.user, subject)
			}
			for _, subject := range tc.others {
				before, err := countOn(op.js, subject)
				require.NoError(t, err)
				require.NoError(t, c.nc.Publish(subject, []byte(`{}`)))
				require.Eventually(t, func() bool { return c.refused(subject) }, 5*time.Second, 20*time.Millisecond,
					"the server reports a permission violation for %s on %s", tc.user, subject)
				after, err := countOn(op.js, subject)
				require.NoError(t, err)
				assert.Equal(t, before, after, "nothing of %s was stored on %s", tc.user, subject)
			}
			// No component deletes or purges a stream; the operator may.
			deleteDLQ := "$JS.API.STREAM.DELETE." + bus.StreamDLQ
			require.NoError(t, c.nc.Publish(deleteDLQ, nil))
			require.Eventually(t, func() bool { return c.refused(deleteDLQ) }, 5*time.Second, 20*time.Millisecond,
				"%s must not delete a stream", tc.user)
			if tc.consume != "" {
				ackOwnStream(t, op, c, tc.consume)
			}
		})
	}
}

// ackOwnStream: the user reads a message of the stream it consumes through
// a durable consumer and its ack is stored by the server.
func ackOwnStream(t *testing.T, op, c *conn, stream string) {
	t.Helper()
	subjects := map[string]string{
		bus.StreamCommands:        "agents.cmd.test.ack",
		bus.StreamSidecarCommands: "agents.sidecar.s-ack.commands.ping",
		bus.StreamSidecarEvents:   "agents.sidecar.s-ack.events.ping",
		bus.StreamEvents:          "agents.evt.test.s-ack.ping",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subject := subjects[stream]
	durable := fmt.Sprintf("ack-%d", time.Now().UnixNano())
	// A work queue takes one consumer per subject: the provisioned one
	// makes way (each test has a server of its own).
	if existing, ok := map[string]string{bus.StreamCommands: "commands", bus.StreamSidecarCommands: "relay-outbound"}[stream]; ok {
		if err := op.js.DeleteConsumer(ctx, stream, existing); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			require.NoError(t, err)
		}
	}
	_, err := op.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = op.js.Publish(ctx, subject, []byte(`{}`))
	require.NoError(t, err)

	cons, err := c.js.Consumer(ctx, stream, durable)
	require.NoError(t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err, "the user reads its stream")
	require.NoError(t, msg.DoubleAck(ctx), "the server stores the user's ack")
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.NumAckPending)
	require.NoError(t, op.js.DeleteConsumer(ctx, stream, durable))
}

// countOn counts the stored messages on subject, in whichever stream holds it.
func countOn(js jetstream.JetStream, subject string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

func TestUsersFlowOfACommand(t *testing.T) {
	srv := startWithUsers(t)
	op := connectAs(t, srv, "operator")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, bus.Provision(ctx, op.js))

	// The api sends a command and waits on its inbox; the commands worker
	// takes it from its durable consumer, answers on the inbox and acks.
	api := connectAs(t, srv, "api")
	inbox := api.nc.NewRespInbox()
	answers, err := api.nc.SubscribeSync(inbox)
	require.NoError(t, err)
	msg := nats.NewMsg("agents.cmd.session.pause")
	msg.Header.Set("Agents-Reply-To", inbox)
	msg.Data = []byte(`{"id":"c1"}`)
	_, err = api.js.PublishMsg(ctx, msg)
	require.NoError(t, err)

	worker := connectAs(t, srv, "commands")
	cons, err := worker.js.Consumer(ctx, bus.StreamCommands, "commands")
	require.NoError(t, err)
	got, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.NoError(t, worker.nc.Publish(got.Headers().Get("Agents-Reply-To"), []byte(`{"ok":true}`)))
	require.NoError(t, got.DoubleAck(ctx))

	answer, err := answers.NextMsg(5 * time.Second)
	require.NoError(t, err, "the api gets the answer")
	assert.JSONEq(t, `{"ok":true}`, string(answer.Data))

	// The relay keeps its leases in its KV buckets; the api may not.
	relayConn := connectAs(t, srv, "relay")
	kv, err := relayConn.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "relay_sessions"})
	require.NoError(t, err)
	_, err = kv.Put(ctx, "s1", []byte("active"))
	require.NoError(t, err)
	apiKV, err := api.js.KeyValue(ctx, "relay_sessions")
	require.NoError(t, err)
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	_, err = apiKV.Put(pctx, "s1", []byte("forged"))
	require.Error(t, err, "the api may not write the relay's leases")
	e, err := kv.Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "active", string(e.Value()))
}

// TestJSDenyNamesEveryStreamAndConsumer: a stream or durable consumer
// added to nats/ is out of the components' reach from its first day.
func TestJSDenyNamesEveryStreamAndConsumer(t *testing.T) {
	raw, err := os.ReadFile("users.conf")
	require.NoError(t, err)
	conf := string(raw)
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)
	for _, s := range defs.Streams {
		for _, op := range []string{"CREATE", "UPDATE", "DELETE", "PURGE", "MSG.DELETE"} {
			assert.Contains(t, conf, `"$JS.API.STREAM.`+op+`.`+s.Name+`"`)
		}
		for _, c := range defs.Consumers[s.Name] {
			for _, subject := range []string{"CREATE." + s.Name + "." + c.Durable, "CREATE." + s.Name + "." + c.Durable + ".>", "DELETE." + s.Name + "." + c.Durable} {
				assert.Contains(t, conf, `"$JS.API.CONSUMER.`+subject+`"`)
			}
		}
	}
}

// TestComponentsCannotReconfigureTheBus: no component's user changes,
// purges or deletes a stream, nor creates, changes or deletes a durable
// consumer; the operator provisions them. The api still runs the ordered
// consumers of its live streams.
func TestComponentsCannotReconfigureTheBus(t *testing.T) {
	srv := startWithUsers(t)
	op := connectAs(t, srv, "operator")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, bus.Provision(ctx, op.js))
	_, err := op.js.Publish(ctx, "agents.evt.session.s1.session_started", []byte(`{}`))
	require.NoError(t, err)
	events, err := op.js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)

	t.Run("each component", func(t *testing.T) {
		for user := range componentUsers {
			if user == "operator" {
				continue
			}
			t.Run(user, func(t *testing.T) {
				t.Parallel()
				c := connectAs(t, srv, user)
				// A refused request gets no answer: each waits this long.
				short := func() context.Context {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					t.Cleanup(cancel)
					return ctx
				}
				cfg := events.CachedInfo().Config
				cfg.MaxMsgs = 1
				_, err := c.js.UpdateStream(short(), cfg)
				assert.Error(t, err, "%s updated AGENTS_EVENTS", user)
				stream, err := c.js.Stream(short(), bus.StreamEvents)
				require.NoError(t, err, "%s reads the stream's info", user)
				assert.Error(t, stream.Purge(short()), "%s purged AGENTS_EVENTS", user)
				assert.Error(t, c.js.DeleteStream(short(), bus.StreamDLQ), "%s deleted AGENTS_DLQ", user)
				assert.Error(t, c.js.DeleteConsumer(short(), bus.StreamEvents, "pool"), "%s deleted the pool consumer", user)
				_, err = c.js.CreateOrUpdateConsumer(short(), bus.StreamEvents, jetstream.ConsumerConfig{
					Durable: "pool", FilterSubject: "agents.evt.>", AckPolicy: jetstream.AckExplicitPolicy})
				assert.Error(t, err, "%s redefined the pool consumer", user)
			})
		}
	})
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := events.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, events.CachedInfo().Config.MaxMsgs, info.Config.MaxMsgs, "AGENTS_EVENTS kept its limits")
	assert.EqualValues(t, 1, info.State.Msgs, "AGENTS_EVENTS kept its messages")
	_, err = op.js.Consumer(ctx, bus.StreamEvents, "pool")
	require.NoError(t, err, "the pool consumer is still there")

	api := connectAs(t, srv, "api")
	ordered, err := api.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agents.evt.session.>"}})
	require.NoError(t, err)
	msg, err := ordered.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err, "the api reads through an ordered consumer")
	assert.Equal(t, "agents.evt.session.s1.session_started", msg.Subject())
}
