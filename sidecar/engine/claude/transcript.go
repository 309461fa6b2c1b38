package claude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

// The CLI keeps each conversation in a file of its own:
// <config dir>/projects/<the working directory, as a name>/<session id>.jsonl,
// the config dir being $CLAUDE_CONFIG_DIR or $HOME/.claude. It resumes a
// conversation only from the file under its own working directory and
// home, which a fork (another directory, another sandbox home) lacks.

// maxProjectName is how long a project's name gets before the CLI cuts it
// and appends a hash.
const maxProjectName = 200

// projectName is the CLI's name for the directory of the conversations of
// working directory dir: every character but a-z, A-Z and 0-9 becomes '-'.
func projectName(dir string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(dir)) {
		if u < 128 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9') {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) <= maxProjectName {
		return name
	}
	// The CLI's string hash: h = h*31 + c over UTF-16 units, in 32 bits.
	var h int32
	for _, u := range utf16.Encode([]rune(dir)) {
		h = h<<5 - h + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return name[:maxProjectName] + "-" + strconv.FormatInt(abs, 36)
}

// lookup returns the last value of name in env, as the process sees it.
func lookup(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// transcriptPath returns the file of conversation id for a CLI with env
// working in dir.
func transcriptPath(env []string, dir, id string) string {
	config := lookup(env, "CLAUDE_CONFIG_DIR")
	if config == "" {
		config = filepath.Join(lookup(env, "HOME"), ".claude")
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Join(config, "projects", projectName(dir), id+".jsonl")
}

// Transcript returns the conversation's file as the CLI wrote it, nil
// before it wrote one.
func (s *session) Transcript() ([]byte, error) {
	cfg := s.config()
	b, err := os.ReadFile(transcriptPath(s.env, cfg.WorkingDirectory, s.id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// placeTranscript puts the transcript of conversation id that the
// checkpoint store keeps where the CLI resumes it from, unless the CLI
// has it there already.
func (s *session) placeTranscript(ctx context.Context, dir, store, id string) error {
	path := transcriptPath(s.env, dir, id)
	if _, err := os.Stat(path); err == nil || store == "" {
		return nil
	}
	transcript, err := checkpoint.Store{Dir: store}.Conversation(ctx, id)
	if err != nil || transcript == nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("claude: %w", err)
	}
	tmp := path + ".placing"
	if err := os.WriteFile(tmp, transcript, 0o600); err != nil {
		return fmt.Errorf("claude: %w", err)
	}
	return os.Rename(tmp, path)
}
