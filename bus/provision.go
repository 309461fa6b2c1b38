package bus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionOptions tune Provision.
type ProvisionOptions struct {
	// Replicas overrides every stream's num_replicas when above zero: 3 for
	// the three-node cluster, while the files say 1 for a single server.
	// Consumers inherit their stream's replicas.
	Replicas int
	// Definitions is where the stream and consumer files are read from;
	// nil means the files embedded from the nats/ folder.
	Definitions fs.FS
	// Logger receives one line per stream and consumer; nil means
	// slog.Default() with component=provision.
	Logger *slog.Logger
}

// Provision creates or updates every stream and durable consumer defined in
// the nats/ folder. It is idempotent: running it again changes nothing, and a
// changed definition updates the stream or consumer in place (the server
// rejects changes it cannot apply, such as a different retention or storage).
func Provision(ctx context.Context, js jetstream.JetStream) error {
	return ProvisionWith(ctx, js, ProvisionOptions{})
}

// ProvisionWith is Provision with options.
func ProvisionWith(ctx context.Context, js jetstream.JetStream, opts ProvisionOptions) error {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default().With("component", "provision")
	}
	var (
		defs *Definitions
		err  error
	)
	if opts.Definitions != nil {
		defs, err = LoadDefinitions(opts.Definitions)
	} else {
		defs, err = DefaultDefinitions()
	}
	if err != nil {
		return err
	}

	for _, cfg := range defs.Streams {
		if opts.Replicas > 0 {
			cfg.Replicas = opts.Replicas
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("bus: provision stream %s: %w", cfg.Name, err)
		}
		logger.Debug("stream provisioned", "stream", cfg.Name, "subjects", cfg.Subjects, "replicas", cfg.Replicas)
	}
	for _, s := range defs.Streams {
		for _, cfg := range defs.Consumers[s.Name] {
			if _, err := js.CreateOrUpdateConsumer(ctx, s.Name, cfg); err != nil {
				return fmt.Errorf("bus: provision consumer %s on %s: %w", cfg.Durable, s.Name, err)
			}
			logger.Debug("consumer provisioned", "stream", s.Name, "consumer", cfg.Durable)
		}
	}
	return nil
}

// Verify checks that every stream and durable consumer defined in the nats/
// folder exists, for a process that may not provision them (a component's
// NATS user may not create, update or delete them).
func Verify(ctx context.Context, js jetstream.JetStream) error {
	defs, err := DefaultDefinitions()
	if err != nil {
		return err
	}
	const how = "provision them as the operator: `agentbus up`, or `agentbus migrate` with NATS_URL"
	for _, s := range defs.Streams {
		if _, err := js.Stream(ctx, s.Name); err != nil {
			return fmt.Errorf("bus: stream %s: %w (%s)", s.Name, err, how)
		}
		for _, c := range defs.Consumers[s.Name] {
			if _, err := js.Consumer(ctx, s.Name, c.Durable); err != nil {
				return fmt.Errorf("bus: consumer %s on %s: %w (%s)", c.Durable, s.Name, err, how)
			}
		}
	}
	return nil
}

// BucketReplicas returns the replicas of the sidecar events' stream, which
// the key-value buckets of the relays and the runners follow: on a cluster
// they must survive the loss of a node as the streams do, or a component
// stops with the node holding its leases. Before the streams exist it is 0,
// the server's default.
func BucketReplicas(ctx context.Context, js jetstream.JetStream) (int, error) {
	s, err := js.Stream(ctx, StreamSidecarEvents)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bus: replicas of %s: %w", StreamSidecarEvents, err)
	}
	return s.CachedInfo().Config.Replicas, nil
}
