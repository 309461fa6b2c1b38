package archtest

import (
	"go/ast"
	"regexp"
	"slices"
	"sort"
	"testing"
)

// pauseHomes are the files whose code names pause: each layer's own pause
// file, and the fields of the contracts and records that carry a pause.
// Any other file works from the controls' tables and generic code.
var pauseHomes = map[string]string{
	"domain/session_pause.go":           "the session's pause: its operations, events, moves, timeout and methods",
	"domain/session.go":                 "the session's record of when its pause began",
	"domain/session_snapshot.go":        "that record in the stored document",
	"domain/approval.go":                "the pause timeout among the session's timeouts",
	"domain/events_registry.go":         "the pause timeout's event, in the order of the published event list",
	"command/control/controls.go":       "pause's row among the two-phase controls",
	"command/sessions.go":               "the names of pause's commands",
	"api/session_types.go":              "the session's pausedAt in the API",
	"api/catalog_types.go":              "the pause timeout in the catalog's templates",
	"api/templates.go":                  "the pause timeout a template sets",
	"api/waiting_for.go":                "what a paused session waits for, and until when",
	"handlers/reactions/checkpoints.go": "a rewound paused session's sidecar starts paused",
	"sidecar/pause.go":                  "the sidecar's pause: its command, safe point and acks",
	"sidecar/run.go":                    "the sidecar's pause state",
	"sidecar/loop.go":                   "a paused turn is not the end of the work",
	"sidecar/protocol/controls.go":      "the pause command and its ack on the wire",
	"sidecar/protocol/config.go":        "the sidecar's start_paused setting",
}

// pauseName matches an identifier that names pause, but the status
// itself, which every table of statuses names.
var pauseName = regexp.MustCompile(`^(\w*Pause\w*|pause[dA-Z]\w*)$`)

// TestPauseLivesInItsFiles fails on a file that names pause but is not
// one of pauseHomes, and on a home that no longer names it: pause's
// behaviour is found in those files alone.
func TestPauseLivesInItsFiles(t *testing.T) {
	naming := map[string][]string{}
	for _, f := range sourceFiles(t) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if ok && pauseName.MatchString(id.Name) && id.Name != "Paused" && id.Name != "StatusPaused" &&
				!slices.Contains(naming[f.path], id.Name) {
				naming[f.path] = append(naming[f.path], id.Name)
			}
			return true
		})
	}
	for path, names := range naming {
		if _, home := pauseHomes[path]; !home {
			sort.Strings(names)
			t.Errorf("%s names pause (%v): work from the controls' tables, or move it to its layer's pause file", path, names)
		}
	}
	for path := range pauseHomes {
		if naming[path] == nil {
			t.Errorf("%s no longer names pause: take it off pauseHomes", path)
		}
	}
}
