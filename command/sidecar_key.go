package command

// IssueSidecarKey gives the sidecar a runtime is about to start for a
// session an agent API key of its own (IssueSidecarKeyData). Only the
// runtime sends it: the plaintext key is in the live reply alone, never in
// the stored result a repeat gets, so a repeat issues nothing it could
// read.
const IssueSidecarKey = "issue_sidecar_key"

// IssueSidecarKeyData names the engine the runtime's sidecars run: the
// session's first key pins it, and a runtime of another engine is refused.
type IssueSidecarKeyData struct {
	Engine string `json:"engine"`
}

// IssueSidecarKeyResult is the live reply to IssueSidecarKey.
type IssueSidecarKeyResult struct {
	APIKey string `json:"apiKey,omitempty"`
}
