package command

import (
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of the session chain aggregate, sent on
// agents.cmd.chain.<name>. Their aggregateId is the chain id, except
// InitiateHandoff's, which is the session handing off: its chain may not
// exist yet. Commands marked internal are sent by workers (the
// anti-corruption layer and the handoff reaction).
const (
	// CompleteChain closes a chain whose current session is Idle or Completed.
	CompleteChain = "complete_chain"
	// CancelChain cancels a chain; the handoff reaction then cancels its
	// sessions that are still live.
	CancelChain = "cancel_chain"

	// Internal commands.

	// CreateChain creates a chain around its first session and assigns the
	// session to it, in one transaction.
	CreateChain = "create_chain"
	// InitiateHandoff records the handoff document of a session whose
	// context is exhausted, creating the session's chain first if it has none.
	InitiateHandoff = "initiate_handoff"
	// AttachSession adds the continuation session to the chain.
	AttachSession = "attach_session"
)

// chainNamespace derives the id of a chain from its first session.
var chainNamespace = uuid.MustParse("3e1f0b7a-5c2d-4e8f-9a6b-7d0c1e2f3a4b")

// ChainIDFor is the id of the chain created lazily around firstSessionID.
// Every path that creates that chain (the handoff reaction's CreateChain,
// an InitiateHandoff that finds no chain) uses it, so they agree on one
// chain whichever runs first.
func ChainIDFor(firstSessionID uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(chainNamespace, []byte(firstSessionID.String()))
}

// CreateChainData creates a chain; the command's aggregateId is the new
// chain's id.
type CreateChainData struct {
	// FirstSessionID is the session that starts the chain.
	FirstSessionID uuid.UUID `json:"firstSessionId"`
	// OriginalObjective defaults to the first session's objective.
	OriginalObjective string `json:"originalObjective,omitempty"`
}

// InitiateHandoffData is the handoff document a session wrote when its
// context ran out (or when it chose to hand off).
type InitiateHandoffData struct {
	Summary       string `json:"summary"`
	RemainingWork string `json:"remainingWork"`
	KeyDecisions  string `json:"keyDecisions,omitempty"`
}

// AttachSessionData names the continuation session to add to the chain.
type AttachSessionData struct {
	SessionID uuid.UUID `json:"sessionId"`
}

// ChainState is what a chain command returns: the chain's state.
type ChainState = domain.SessionChainSnapshot
