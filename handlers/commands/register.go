package commands

import (
	"time"

	"github.com/agentbus/agentbus/domain"
)

// Register adds the handler of every command to d. now is the clock the
// handlers pass to the domain (nil: time.Now); pool caps each owner's
// running sessions.
func Register(d *Dispatcher, now Clock, pool domain.SessionPool) {
	if now == nil {
		now = time.Now
	}
	registerSession(d, now)
	registerSidecarKey(d)
	registerSessionSkills(d, now)
	registerQueue(d, now)
	registerPool(d, now, pool)
	registerChain(d, now)
	registerSkill(d, now)
	registerTemplate(d, now)
	registerSessionLog(d, now)
	registerAgent(d, now)
}
