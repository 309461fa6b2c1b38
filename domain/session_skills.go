package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// EnableSkill adds an active skill of the same owner to the session. Only
// an Idle or Interrupted session may change skills, so a turn never runs
// with half a configuration; the sidecar is asked to reload at once.
func (s *AgentSession) EnableSkill(skill *AgentSkill, now time.Time) error {
	if err := s.allow(OpEnableSkill); err != nil {
		return err
	}
	if skill == nil {
		return invalid("skillId", "must be set")
	}
	if skill.OwnerID() != s.ownerID {
		return &NotFoundError{Entity: "AgentSkill", ID: skill.ID().String()}
	}
	if !skill.IsActive() {
		return s.refuse(OpEnableSkill, ErrSkillInactive)
	}
	if slices.Contains(s.enabledSkillIDs, skill.ID()) {
		return s.refuse(OpEnableSkill, ErrSkillAlreadyEnabled)
	}
	s.enabledSkillIDs = append(s.enabledSkillIDs, skill.ID())
	s.updatedAt = now.UTC()
	s.raise(SessionSkillEnabledEvent{SessionMeta: s.meta(now), SkillID: skill.ID()})
	s.requestReload(now)
	return nil
}

// DisableSkill removes a skill from the session (Idle or Interrupted
// only); the sidecar is asked to reload at once.
func (s *AgentSession) DisableSkill(skillID uuid.UUID, now time.Time) error {
	if err := s.allow(OpDisableSkill); err != nil {
		return err
	}
	i := slices.Index(s.enabledSkillIDs, skillID)
	if i < 0 {
		return s.refuse(OpDisableSkill, ErrSkillNotEnabled)
	}
	s.enabledSkillIDs = slices.Delete(s.enabledSkillIDs, i, i+1)
	s.updatedAt = now.UTC()
	s.raise(SessionSkillDisabledEvent{SessionMeta: s.meta(now), SkillID: skillID})
	s.requestReload(now)
	return nil
}

// RequestReload asks the sidecar to reload the composed configuration
// (after skills changed). Idle or Interrupted only; asking again before
// the ack is allowed and simply reloads again.
func (s *AgentSession) RequestReload(now time.Time) error {
	if err := s.allow(OpRequestReload); err != nil {
		return err
	}
	s.requestReload(now)
	return nil
}

func (s *AgentSession) requestReload(now time.Time) {
	s.reloadPending = true
	s.updatedAt = now.UTC()
	s.raise(SessionReloadRequestedEvent{SessionMeta: s.meta(now), EnabledSkillIDs: cloneIDs(s.enabledSkillIDs),
		CommandID: s.awaitAck(SidecarReload)})
}

// ConfirmReloaded records the reload_config_ack of the awaited reload
// (commandID; an ack of a reload asked for again since is a stray). The
// ack is accepted in any status with a live sidecar, since a turn may have
// begun meanwhile.
func (s *AgentSession) ConfirmReloaded(commandID uuid.UUID, now time.Time) error {
	if err := s.allow(OpConfirmReloaded); err != nil {
		return err
	}
	if !s.reloadPending {
		return s.refuse(OpConfirmReloaded, ErrNoReloadPending)
	}
	if err := s.checkAck(OpConfirmReloaded, SidecarReload, commandID); err != nil {
		return err
	}
	s.acked(SidecarReload)
	s.reloadPending = false
	s.updatedAt = now.UTC()
	s.raise(SessionReloadedEvent{SessionMeta: s.meta(now)})
	return nil
}
