package bus

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsdefs "github.com/agentbus/agentbus/nats"
)

// Definitions are the streams and durable consumers described by the JSON
// files of the nats/ folder.
type Definitions struct {
	// Streams are the stream configurations, sorted by name.
	Streams []jetstream.StreamConfig
	// Consumers maps a stream name to its durable consumer configurations,
	// sorted by durable name.
	Consumers map[string][]jetstream.ConsumerConfig
	// retries maps "<stream>/<durable>" to the consumer's retry_backoff.
	retries map[string][]time.Duration
}

// retrySchedule is what a consumer file says besides the server's
// settings. retry_backoff[n-1] is how long bus.Run waits before a message
// whose handler failed on its n-th delivery is delivered again (the last
// value repeats). Unlike the server's backoff it leaves the ack wait
// alone: a delivery whose process died comes back after the short ack
// wait, not after the schedule's long tail.
type retrySchedule struct {
	RetryBackoff []time.Duration `json:"retry_backoff"`
}

// DefaultDefinitions loads the definitions embedded from the nats/ folder.
func DefaultDefinitions() (*Definitions, error) {
	return LoadDefinitions(natsdefs.Definitions)
}

// LoadDefinitions reads streams/<STREAM>.json and
// consumers/<STREAM>/<CONSUMER>.json from fsys. A file's name must match the
// name inside it, and a consumer's folder must name a defined stream, so the
// files stay usable with `nats stream add --config` and
// `nats consumer add <STREAM> --config`.
func LoadDefinitions(fsys fs.FS) (*Definitions, error) {
	defs := &Definitions{Consumers: map[string][]jetstream.ConsumerConfig{}, retries: map[string][]time.Duration{}}

	streamFiles, err := fs.Glob(fsys, "streams/*.json")
	if err != nil {
		return nil, err
	}
	for _, file := range streamFiles {
		var cfg jetstream.StreamConfig
		if err := readJSON(fsys, file, &cfg); err != nil {
			return nil, err
		}
		if want := strings.TrimSuffix(path.Base(file), ".json"); cfg.Name != want {
			return nil, fmt.Errorf("bus: %s: stream name %q must match the file name %q", file, cfg.Name, want)
		}
		defs.Streams = append(defs.Streams, cfg)
	}
	slices.SortFunc(defs.Streams, func(a, b jetstream.StreamConfig) int { return strings.Compare(a.Name, b.Name) })

	consumerFiles, err := fs.Glob(fsys, "consumers/*/*.json")
	if err != nil {
		return nil, err
	}
	for _, file := range consumerFiles {
		stream := path.Base(path.Dir(file))
		if defs.Stream(stream) == nil {
			return nil, fmt.Errorf("bus: %s: no stream %s is defined", file, stream)
		}
		var cfg jetstream.ConsumerConfig
		if err := readJSON(fsys, file, &cfg); err != nil {
			return nil, err
		}
		if want := strings.TrimSuffix(path.Base(file), ".json"); cfg.Durable != want {
			return nil, fmt.Errorf("bus: %s: durable_name %q must match the file name %q", file, cfg.Durable, want)
		}
		var retries retrySchedule
		if err := readJSON(fsys, file, &retries); err != nil {
			return nil, err
		}
		defs.Consumers[stream] = append(defs.Consumers[stream], cfg)
		defs.retries[stream+"/"+cfg.Durable] = retries.RetryBackoff
	}
	for _, cs := range defs.Consumers {
		slices.SortFunc(cs, func(a, b jetstream.ConsumerConfig) int { return strings.Compare(a.Durable, b.Durable) })
	}
	return defs, nil
}

// Stream returns the definition of the named stream, or nil.
func (d *Definitions) Stream(name string) *jetstream.StreamConfig {
	for i := range d.Streams {
		if d.Streams[i].Name == name {
			return &d.Streams[i]
		}
	}
	return nil
}

// Consumer returns the definition of the durable consumer on stream, or nil.
func (d *Definitions) Consumer(stream, durable string) *jetstream.ConsumerConfig {
	for i, c := range d.Consumers[stream] {
		if c.Durable == durable {
			return &d.Consumers[stream][i]
		}
	}
	return nil
}

// RetryBackoff returns the retry_backoff of the durable consumer on
// stream, or nil.
func (d *Definitions) RetryBackoff(stream, durable string) []time.Duration {
	return d.retries[stream+"/"+durable]
}

// StreamFor returns the name of the stream whose subjects capture subject,
// or "" when none does. Streams never capture overlapping subjects, so the
// answer is unique.
func (d *Definitions) StreamFor(subject string) string {
	for _, s := range d.Streams {
		for _, filter := range s.Subjects {
			if SubjectMatches(filter, subject) {
				return s.Name
			}
		}
	}
	return ""
}

// SubjectMatches reports whether the literal subject matches filter, which
// may hold the wildcards * (one token) and > (one or more trailing tokens).
func SubjectMatches(filter, subject string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

func readJSON(fsys fs.FS, file string, v any) error {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bus: %s: %w", file, err)
	}
	return nil
}
