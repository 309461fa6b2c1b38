package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentbus/agentbus/sidecar/launcher"
)

// upBanner is what `up` tells a person once it is up: where each door is,
// the token to sign in with, which engine runs the agents and where the
// data lives.
type upBanner struct {
	HTTPAddr, NATSURL, Credentials, Token, UserID string
	DataDir, Workspace                            string
	// Runtime is whether this process starts the sessions' sidecars.
	Runtime bool
}

// engineText says which engine runs the agents, from the same settings
// the runtime worker reads.
func engineText(runtime bool) string {
	switch {
	case !runtime:
		return "none here: the runtime worker runs elsewhere (agentbus worker runtime)"
	case envOr("AGENTBUS_RUNTIME", string(launcher.ModeProcess)) != string(launcher.ModeProcess):
		return "external: no sidecar is started here (AGENTBUS_RUNTIME=" + os.Getenv("AGENTBUS_RUNTIME") + ")"
	}
	switch engine := os.Getenv("AGENTBUS_ENGINE"); engine {
	case "", "script":
		return "script: scripted scenarios, no model (AGENTBUS_ENGINE=claude runs Claude Code)"
	case "claude":
		endpoint := envOr("ANTHROPIC_BASE_URL", "Anthropic's API")
		return "claude: Claude Code against " + endpoint
	default:
		return engine
	}
}

// write prints the banner, one line a door, with nothing that needs
// scrolling back to find.
func (b upBanner) write(w io.Writer) {
	fmt.Fprintf(w, `
agentbus is up
  UI:         http://%[1]s/ui/   (sign in with the token below)
  API:        http://%[1]s/docs   (health: /readyz)
  NATS:       %[2]s   (its credentials and the servers': %[3]s)
  engine:     %[4]s
  data:       %[5]s
  workspace:  %[6]s
  token:      %[7]s
              (bearer token of the development user %[8]s)
  command line: export AGENTBUS_API=%[1]s AGENTBUS_TOKEN=<the token>; %[9]s sessions help
  stop with Ctrl-C

`, b.HTTPAddr, b.NATSURL, b.Credentials, engineText(b.Runtime), b.DataDir, b.Workspace, b.Token, b.UserID, selfPath())
}

// selfPath is how a person at this directory runs this binary again:
// relative when it is under it (bin/agentbus), else its full path.
func selfPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "agentbus"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return exe
}
