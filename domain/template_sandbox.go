package domain

// Bounds of SandboxLimits.
const (
	MaxSandboxProcesses = 100000
	MinSandboxMemoryMiB = 64
	MaxSandboxMemoryMiB = 1 << 20
)

// SandboxLimits override, for the sessions of a template, the limits of
// the sandbox their agents run in; a zero field keeps the deployment's
// (--sandbox-max-processes, --sandbox-max-memory).
type SandboxLimits struct {
	// MaxProcesses caps the processes of one session's sandbox.
	MaxProcesses int `json:"maxProcesses,omitempty"`
	// MaxMemoryMiB caps the memory each of its processes may allocate.
	MaxMemoryMiB int64 `json:"maxMemoryMiB,omitempty"`
}

// Validate reports limits out of bounds.
func (l SandboxLimits) Validate() error {
	switch {
	case l.MaxProcesses < 0 || l.MaxProcesses > MaxSandboxProcesses:
		return invalid("sandboxLimits.maxProcesses", "must be between 1 and 100000, or 0 for the deployment's")
	case l.MaxMemoryMiB != 0 && (l.MaxMemoryMiB < MinSandboxMemoryMiB || l.MaxMemoryMiB > MaxSandboxMemoryMiB):
		return invalid("sandboxLimits.maxMemoryMiB", "must be between 64 and 1048576, or 0 for the deployment's")
	}
	return nil
}

// SandboxLimits returns the template's limits of its sessions' sandboxes.
func (t *AgentTemplate) SandboxLimits() SandboxLimits { return t.sandboxLimits }
