// Package nats holds the JetStream definitions of agentbus: one JSON file per
// stream (streams/<STREAM>.json) and per durable consumer
// (consumers/<STREAM>/<CONSUMER>.json), in the JetStream API format that the
// nats CLI reads:
//
//	nats stream add --config nats/streams/AGENTS_EVENTS.json
//	nats consumer add AGENTS_EVENTS --config nats/consumers/AGENTS_EVENTS/pool.json
//
// The same files are embedded here and provisioned by bus.Provision, so the
// CLI and the binaries share one source of truth. The consumer files and
// users.conf are written by `agentbus gen` from the workers' declarations
// (cmd/agentbus). The folder also holds the
// server configuration for the single-node (server.conf) and the three-node
// cluster (cluster/node-N.conf) setups.
package nats

import "embed"

// Definitions holds streams/*.json and consumers/*/*.json.
//
//go:embed streams consumers
var Definitions embed.FS

// Users is users.conf: one user per component and the operator, each
// password a $NATS_PASSWORD_<USER> variable.
//
//go:embed users.conf
var Users string
