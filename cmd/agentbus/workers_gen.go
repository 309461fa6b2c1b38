package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// What running the workers apart needs is written from their declarations
// by `agentbus gen`: the consumer files of nats/consumers (which the nats
// CLI reads and the binaries embed), nats/users.conf (which the NATS
// servers include) and the workers' services of compose.yaml. A new worker
// is then its handler and its entry in workers.
//
//go:generate go run . gen --dir ../..

// consumer is a durable consumer a worker reads, with its JetStream
// config.
type consumer struct {
	stream, durable string
	config          *jetstream.ConsumerConfig
	// retry is bus.Run's delay before each redelivery of a message whose
	// handler failed (the file's retry_backoff). It is not the server's
	// backoff, which would also stand in for the ack wait of each
	// delivery: a delivery whose process died would then hold its message
	// for the schedule's long tail.
	retry []time.Duration
}

// consumerDefinition is what a consumer's file holds: its JetStream config
// and bus.Run's retry schedule.
type consumerDefinition struct {
	*jetstream.ConsumerConfig
	RetryBackoff []time.Duration `json:"retry_backoff,omitempty"`
}

// reaction is a consumer of stream that redelivers after bus.Run's own
// backoff, gives a handler five attempts, and keeps a session's messages in
// order across the worker's copies (one pinned copy at a time).
func reaction(stream, durable, description string, filters ...string) consumer {
	cfg := &jetstream.ConsumerConfig{
		Durable: durable, Description: description,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxDeliver: 6, MaxAckPending: 1000, ReplayPolicy: jetstream.ReplayInstantPolicy,
		PriorityGroups: []string{"ordered"}, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: pinnedTTL,
	}
	if len(filters) == 1 {
		cfg.FilterSubject = filters[0]
	} else {
		cfg.FilterSubjects = filters
	}
	return consumer{stream: stream, durable: durable, config: cfg}
}

// pinnedTTL is how long a pinned copy may go without pulling before another
// copy is pinned: short, because a crashed copy leaves its consumer without
// a pinned copy until it runs out, while every message it held waits and
// loses a delivery. A pinned copy pulls again every third of it.
const pinnedTTL = 5 * time.Second

// rawEventsBackoff is how the raw events' consumers retry: soon at first,
// then rarely, so that a poison event does not hold a session's others for
// long before it is dead-lettered.
var rawEventsBackoff = []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 30 * time.Second,
	2 * time.Minute, 10 * time.Minute, 30 * time.Minute}

// unordered is c without a priority group: any copy takes any message.
func (c consumer) unordered() consumer {
	return c.with(func(cfg *jetstream.ConsumerConfig) {
		cfg.PriorityGroups, cfg.PriorityPolicy, cfg.PinnedTTL = nil, jetstream.PriorityPolicyNone, 0
	})
}

// retrying is c redelivered after backoff when its handler failed, with
// backoff's first value as its ack wait, delivered at most maxDeliver
// times.
func (c consumer) retrying(maxDeliver int, backoff ...time.Duration) consumer {
	c = c.with(func(cfg *jetstream.ConsumerConfig) {
		cfg.MaxDeliver, cfg.AckWait = maxDeliver, backoff[0]
	})
	c.retry = backoff
	return c
}

// with is c with its config changed by change.
func (c consumer) with(change func(*jetstream.ConsumerConfig)) consumer {
	cfg := *c.config
	change(&cfg)
	c.config = &cfg
	return c
}

// deployment is what a worker's compose service needs beyond the common
// settings (x-agentbus), its command and its NATS user.
type deployment struct {
	// note is what an operator should know, written above the service.
	note string
	// env are environment lines ("KEY: value").
	env []string
	// workspace mounts the agents' workspace at /workspace and says so.
	workspace bool
	// volumes are the service's other volumes.
	volumes []string
	// securityOpt is the service's security_opt.
	securityOpt []string
	// service and command name a component with a subcommand of its own;
	// by default worker-<name> runs `worker <name>`.
	service string
	command string
}

// componentUser is a NATS user of a component that is not a worker.
type componentUser struct {
	name, note string
	allow      []string
}

// otherUsers are the NATS users beside the operator's and the workers'.
var otherUsers = []componentUser{
	{name: "api", note: "HTTP API: sends commands, reads AGENTS_EVENTS through ordered consumers.",
		allow: []string{"$JS.API.>", bus.AllCommandsFilter()}},
	{name: "runner", note: "runner: runs the sidecars assigned to it; writes its lease and marks an assignment whose sidecar exited.",
		allow: []string{"$JS.API.>", "$KV." + runners.RunnersBucket + ".>", "$KV." + runners.AssignmentsBucket + ".>"}},
}

// generatedFiles returns the files `agentbus gen` writes, by path under
// the repository root dir, which holds compose.yaml.
func generatedFiles(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, name := range workerNames() {
		for _, c := range workers[name].consumes {
			// Subjects keep their ">" as written, for the operator who reads
			// the file.
			var data bytes.Buffer
			enc := json.NewEncoder(&data)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(consumerDefinition{c.config, c.retry}); err != nil {
				return nil, err
			}
			files[consumerFile(c)] = data.Bytes()
		}
	}
	users, err := usersConf()
	if err != nil {
		return nil, err
	}
	files["nats/users.conf"] = users
	compose, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		return nil, err
	}
	if files["compose.yaml"], err = composeYAML(compose); err != nil {
		return nil, err
	}
	return files, nil
}

func consumerFile(c consumer) string {
	return "nats/consumers/" + c.stream + "/" + c.durable + ".json"
}

// staleFiles are the consumer files under dir that no worker declares.
func staleFiles(dir string, files map[string][]byte) ([]string, error) {
	found, err := fs.Glob(os.DirFS(dir), "nats/consumers/*/*.json")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(found, func(f string) bool { _, ok := files[f]; return ok }), nil
}

// runGen is `agentbus gen`: it writes the generated files.
func runGen(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fs.String("dir", ".", "the repository's root, which holds compose.yaml and nats/")
	_ = fs.Parse(args)
	files, err := generatedFiles(*dir)
	if err != nil {
		return err
	}
	stale, err := staleFiles(*dir, files)
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(filepath.Join(*dir, f)); err != nil {
			return err
		}
	}
	for _, f := range slices.Sorted(mapKeys(files)) {
		path := filepath.Join(*dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[f], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func mapKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// errNoRegion says compose.yaml lacks the markers of a generated part.
var errNoRegion = errors.New("no generated part")

// replaceRegion replaces the lines between the markers of the part name
// ("# BEGIN generated: <name>" and "# END generated: <name>", at any
// indentation) with body.
func replaceRegion(text []byte, name, body string) ([]byte, error) {
	begin, end := []byte("# BEGIN generated: "+name+"\n"), []byte("# END generated: "+name+"\n")
	i, j := bytes.Index(text, begin), bytes.Index(text, end)
	if i < 0 || j < i {
		return nil, fmt.Errorf("compose.yaml: %w %q", errNoRegion, name)
	}
	j = bytes.LastIndexByte(text[:j], '\n') + 1
	out := slices.Concat(text[:i+len(begin)], []byte(body), text[j:])
	return out, nil
}

// passwordEnv is the variable of user's password, for the NATS servers.
func passwordEnv(user string) string {
	return "NATS_PASSWORD_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_"))
}

// userNames are every NATS user: the operator, the other components' and
// the workers'.
func userNames() []string {
	names := []string{"operator"}
	for _, u := range otherUsers {
		names = append(names, u.name)
	}
	return append(names, workerNames()...)
}

// composeYAML is compose with its generated parts written: the NATS
// servers' passwords and the workers' services.
func composeYAML(compose []byte) ([]byte, error) {
	var env strings.Builder
	for _, user := range userNames() {
		fmt.Fprintf(&env, "    %s: ${%s:-change-me-%s}\n", passwordEnv(user), passwordEnv(user), user)
	}
	out, err := replaceRegion(compose, "nats passwords", env.String())
	if err != nil {
		return nil, err
	}
	var services strings.Builder
	for i, name := range workerNames() {
		if i > 0 {
			services.WriteString("\n")
		}
		composeService(&services, name, workers[name])
	}
	return replaceRegion(out, "worker services", services.String())
}

// composeService writes the compose service that runs the named worker.
func composeService(b *strings.Builder, name string, w worker) {
	d := w.deploy
	service, command := "worker-"+name, `"worker", "`+name+`"`
	if d.service != "" {
		service, command = d.service, `"`+d.command+`"`
	}
	writeComment(b, "  # ", w.summary)
	if d.note != "" {
		writeComment(b, "  # ", d.note)
	}
	fmt.Fprintf(b, "  %s:\n    <<: *agentbus\n    command: [%s, \"--http\", \":8080\"]\n", service, command)
	if len(d.securityOpt) > 0 {
		fmt.Fprintf(b, "    security_opt: [%s]\n", strings.Join(d.securityOpt, ", "))
	}
	fmt.Fprintf(b, "    environment:\n      <<: *agentbus-env\n      NATS_USER: %s\n      NATS_PASSWORD: ${%s:-change-me-%s}\n",
		name, passwordEnv(name), name)
	for _, line := range d.env {
		fmt.Fprintf(b, "      %s\n", line)
	}
	volumes := d.volumes
	if d.workspace {
		b.WriteString("      AGENTBUS_WORKSPACE: /workspace\n")
		volumes = append([]string{"*workspace"}, volumes...)
	}
	if len(volumes) > 0 {
		fmt.Fprintf(b, "    volumes: [%s]\n", strings.Join(volumes, ", "))
	}
	b.WriteString("    healthcheck: *ready\n")
}

// writeComment writes text as comment lines of at most 78 characters.
func writeComment(b *strings.Builder, prefix, text string) {
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line) > len(prefix) && len(line)+1+len(word) > 78 {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = prefix
		}
		if len(line) > len(prefix) {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
}

// publishAllowed is what the NATS user of w may publish on: the JetStream
// API, its subjects, the acks of the streams it consumes and, if it
// consumes any, the dead letters.
func publishAllowed(w worker) []string {
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

// jsDeny is what only provisioning does, which no component may: create,
// update, purge or delete the streams, delete or purge the relay's
// buckets, and create, update or delete the durable consumers.
func jsDeny() ([]string, error) {
	defs, err := bus.DefaultDefinitions()
	if err != nil {
		return nil, err
	}
	var deny []string
	for _, s := range defs.Streams {
		deny = append(deny, "$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name, "$JS.API.STREAM.DELETE."+s.Name,
			"$JS.API.STREAM.PURGE."+s.Name, "$JS.API.STREAM.MSG.DELETE."+s.Name)
	}
	for _, kv := range []string{relay.SessionsBucket, relay.MembersBucket} {
		deny = append(deny, "$JS.API.STREAM.DELETE.KV_"+kv, "$JS.API.STREAM.PURGE.KV_"+kv, "$JS.API.STREAM.MSG.DELETE.KV_"+kv)
	}
	deny = append(deny, "$JS.API.CONSUMER.DURABLE.CREATE.>")
	var consumers []consumer
	for _, name := range workerNames() {
		consumers = append(consumers, workers[name].consumes...)
	}
	slices.SortFunc(consumers, func(a, b consumer) int {
		return strings.Compare(a.stream+"."+a.durable, b.stream+"."+b.durable)
	})
	for _, c := range consumers {
		id := c.stream + "." + c.durable
		deny = append(deny, "$JS.API.CONSUMER.CREATE."+id, "$JS.API.CONSUMER.CREATE."+id+".>", "$JS.API.CONSUMER.DELETE."+id)
	}
	return deny, nil
}

// usersHeader opens nats/users.conf.
const usersHeader = `# agentbus: one NATS user per component, each allowed to publish only on the
# subjects its component writes. Included by server.conf and cluster/node-N.conf.
# Written by ` + "`agentbus gen`" + ` from the workers' declarations (cmd/agentbus): do not edit.
#
# Passwords come from the environment of the nats-server process
# (NATS_PASSWORD_<USER>, e.g. NATS_PASSWORD_RELAY); the component connects
# with NATS_USER and NATS_PASSWORD (or nats://user:password@host in NATS_URL).
# The operator user is for people and the nats CLI: it may do anything.
#
# What every component shares:
# - $JS.API.> : the JetStream API, for fetching from their durable consumers,
#   publishing through JetStream, reading stream and consumer info, and (the
#   api, the relay's KV watchers) ordered consumers of their own. JS_DENY
#   takes away what only provisioning does: creating, updating, purging or
#   deleting the AGENTS_* streams, deleting or purging the relay's buckets,
#   and creating, updating or deleting the durable consumers of nats/consumers
#   (the operator provisions them: ` + "`agentbus up`" + `, or ` + "`agentbus migrate`" + ` with
#   NATS_URL as the operator). nats/users_test.go checks that JS_DENY names
#   every stream and consumer defined here.
# - _INBOX.>  : replies to JetStream API requests, publish acks and the
#   command results the commands worker sends back.
# Acks ($JS.ACK.<stream>.>) are allowed only on the streams the component
# consumes, and agents.dlq.> only to components that run a consumer.
`

// usersConf is nats/users.conf: the operator, the other components' users
// and each worker's, allowed to publish on what its entry declares.
func usersConf() ([]byte, error) {
	deny, err := jsDeny()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(usersHeader)
	b.WriteString("\n")
	writeList(&b, "JS_DENY", deny)
	for _, name := range workerNames() {
		if d := workers[name].denies; len(d) > 0 {
			fmt.Fprintf(&b, "\n# The %s worker's: JS_DENY, and %s.\n", name, strings.Join(d, ", "))
			writeList(&b, denyVar(name), slices.Concat(deny, d))
		}
	}
	b.WriteString("INBOX = {allow: [\"_INBOX.>\"]}\n\nauthorization {\n  users: [\n")
	b.WriteString("    {user: operator, password: $" + passwordEnv("operator") + "}\n")
	for _, u := range otherUsers {
		writeUser(&b, u.name, u.note, u.allow, "JS_DENY")
	}
	for _, name := range workerNames() {
		w := workers[name]
		deny := "JS_DENY"
		if len(w.denies) > 0 {
			deny = denyVar(name)
		}
		writeUser(&b, name, name+": "+w.summary, publishAllowed(w), deny)
	}
	b.WriteString("  ]\n}\n")
	return []byte(b.String()), nil
}

// denyVar names the deny list of a worker with denies of its own.
func denyVar(worker string) string {
	return "JS_DENY_" + strings.ToUpper(strings.ReplaceAll(worker, "-", "_"))
}

// writeList writes the variable name as a list of subjects, one a line.
func writeList(b *strings.Builder, name string, subjects []string) {
	b.WriteString(name + " = [\n")
	for i, s := range subjects {
		sep := ","
		if i == len(subjects)-1 {
			sep = ""
		}
		fmt.Fprintf(b, "  %q%s\n", s, sep)
	}
	b.WriteString("]\n")
}

// writeUser writes the user name, allowed to publish on allow but the
// subjects of the variable deny, and to subscribe to its inbox.
func writeUser(b *strings.Builder, name, note string, allow []string, deny string) {
	b.WriteString("\n")
	writeComment(b, "    # ", note)
	quoted := make([]string, len(allow))
	for i, s := range allow {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	fmt.Fprintf(b, "    {user: %s, password: $%s, permissions: {\n", name, passwordEnv(name))
	fmt.Fprintf(b, "      publish: {allow: [%s], deny: $%s}\n", strings.Join(quoted, ", "), deny)
	b.WriteString("      subscribe: $INBOX\n    }}\n")
}
