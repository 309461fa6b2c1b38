// Package domain is the model of agent sessions: the aggregates
// (AgentSession, SessionMessageQueue, SessionChain, AgentSkill,
// AgentTemplate), their entities and value objects, the domain events they
// raise and the SessionPool domain service.
//
// The package is pure on purpose, so that every rule can be tested in
// microseconds and every process (api, workers) applies the same rules:
// it performs no I/O and imports no NATS, Redis, SQL or HTTP package. The
// current time and new identifiers are passed in by the caller, and so is
// the entropy used for API keys.
//
// Every aggregate keeps its fields unexported, is created by a validating
// constructor (NewAgentSession, NewSessionChain, ...) and is rebuilt by
// persistence from a snapshot (UnmarshalAgentSessionFromDatabase, ...).
// Methods that change state either succeed and record domain events, which
// the caller takes with PopEvents and writes to the outbox in the same
// transaction, or return a typed error (see ValidationError,
// TransitionError, NotFoundError) and change nothing.
//
// The AgentSession state machine is data: SessionTransitions lists every
// allowed (operation, status) move and the methods consult it, so the
// table, the tests and the documentation cannot drift apart. See README.md
// for a diagram.
package domain
