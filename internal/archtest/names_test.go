package archtest

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/domain"
)

// namesHome lists the packages that spell event names and subjects: the
// domain's event types, the bus's subject builders and the sidecar's wire
// protocol, which does not depend on the control plane.
var namesHome = []string{"domain/", "bus/", "sidecar/protocol/"}

// TestNamesComeFromTypes fails on a string literal, outside the packages
// that own them, that is a domain event's name or looks like a NATS
// subject (agents.…): such names are taken from the event types'
// EventType() and the bus's subject builders, so renaming one is one edit.
func TestNamesComeFromTypes(t *testing.T) {
	events := map[string]bool{}
	for _, name := range domain.EventTypes() {
		events[name] = true
	}
	for _, f := range sourceFiles(t, namesHome...) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			switch {
			case events[s]:
				t.Errorf("%s: event name %q spelled as a literal: use the event type's EventType()", f.pos(lit), s)
			case strings.HasPrefix(s, "agents."):
				t.Errorf("%s: subject %q spelled as a literal: use a subject builder of bus", f.pos(lit), s)
			}
			return true
		})
	}
}
