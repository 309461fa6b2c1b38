package domain

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// SidecarCommand names a command the session sends its sidecar and waits
// to see acknowledged: the second phase of a two-phase control.
type SidecarCommand string

// The sidecar commands that are acknowledged; the names are the sidecar
// protocol's command types.
const (
	SidecarInterrupt SidecarCommand = "interrupt"
	SidecarResume    SidecarCommand = "resume"
	SidecarStop      SidecarCommand = "stop"
	SidecarReload    SidecarCommand = "reload_config"
)

// AwaitedAck is a sidecar command the session sent and waits to see
// acknowledged. Only an ack that echoes its CommandID confirms it.
type AwaitedAck struct {
	Command   SidecarCommand `json:"command"`
	CommandID uuid.UUID      `json:"commandId"`
}

// sidecarCommandNamespace derives the ids of the sidecar commands a session
// sends from the session's id and a counter: deterministic, so the domain
// needs no random source and a redelivered event sends the same command.
var sidecarCommandNamespace = uuid.MustParse("3c1f7a5e-2b9d-4e8a-a6c4-8d0e2f4b6a19")

// awaitAck names the next sidecar command of kind cmd and waits for its
// ack, in place of any earlier command of that kind: asking again makes
// the earlier command's ack a stray.
func (s *AgentSession) awaitAck(cmd SidecarCommand) uuid.UUID {
	s.sidecarCommandSeq++
	id := uuid.NewSHA1(sidecarCommandNamespace, fmt.Appendf(nil, "%s/%d", s.id, s.sidecarCommandSeq))
	s.awaited = slices.DeleteFunc(s.awaited, func(a AwaitedAck) bool { return a.Command == cmd })
	s.awaited = append(s.awaited, AwaitedAck{Command: cmd, CommandID: id})
	return id
}

// checkAck refuses an ack that does not echo the id of the awaited
// command of its kind: it acknowledges something never sent, or sent and
// already superseded, and must change nothing.
func (s *AgentSession) checkAck(op Operation, cmd SidecarCommand, commandID uuid.UUID) error {
	if !slices.Contains(s.awaited, AwaitedAck{Command: cmd, CommandID: commandID}) {
		return s.refuse(op, ErrUnexpectedAck)
	}
	return nil
}

// acked forgets the awaited command of kind cmd once its ack was applied.
func (s *AgentSession) acked(cmd SidecarCommand) {
	s.awaited = slices.DeleteFunc(s.awaited, func(a AwaitedAck) bool { return a.Command == cmd })
}

// AwaitedAcks returns the sidecar commands waiting for their ack.
func (s *AgentSession) AwaitedAcks() []AwaitedAck { return slices.Clone(s.awaited) }
