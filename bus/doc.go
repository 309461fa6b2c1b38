// Package bus is agentbus's JetStream layer: it starts an embedded server
// (StartEmbedded), connects (Connect), provisions the streams and durable
// consumers defined in the nats/ folder (Provision), publishes envelopes
// with ids and headers, single or as atomic batches (Publisher), and runs
// the durable pull consumer every worker uses (Run): ack on success, nak
// with backoff on error, term and dead letter when retrying cannot help.
//
// Subjects and streams (DESIGN.md section 4):
//
//	AGENTS_COMMANDS          agents.cmd.<aggregate>.<command>             work queue
//	AGENTS_EVENTS            agents.evt.<aggregate>.<aggregateId>.<event> limits, replayable
//	AGENTS_SIDECAR_EVENTS    agents.sidecar.<sessionId>.events.<type>     limits, replayable
//	AGENTS_SIDECAR_COMMANDS  agents.sidecar.<sessionId>.commands.<type>   work queue
//	AGENTS_DLQ               agents.dlq.<consumer>                        limits
package bus
