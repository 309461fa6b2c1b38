package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbus/agentbus/api"
)

// jwtSecretEnv names the HS256 secret people's tokens are signed with.
const jwtSecretEnv = "AGENTBUS_JWT_SECRET"

// jwtSecretFile is where `up` keeps the secret it generated, in its data
// directory, readable by its owner only.
const jwtSecretFile = "jwt-secret"

// errNoJWTSecret refuses to accept tokens without a secret of our own: the
// public development secret would let anyone who reaches the port sign a
// token for any user.
var errNoJWTSecret = errors.New("no JWT secret: set " + jwtSecretEnv +
	", or pass --dev to accept tokens signed with the public development secret (a developer's machine only)")

// dataDirSecret returns $AGENTBUS_JWT_SECRET, or else the secret kept in
// dataDir, generating it (random, mode 0600) when create is true and there
// is none yet. `up` creates it on its first start; `token` reads it, so the
// tokens it prints are accepted by the `up` of the same data directory.
func dataDirSecret(dataDir string, create bool) (string, error) {
	if s := os.Getenv(jwtSecretEnv); s != "" {
		return s, nil
	}
	path := filepath.Join(dataDir, jwtSecretFile)
	secret, err := readSecret(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !create {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no JWT secret in %s: start `agentbus up --data-dir %s` once, or set %s", path, dataDir, jwtSecretEnv)
		}
		return secret, err
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate the JWT secret: %w", err)
	}
	secret = hex.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	// O_EXCL: of two processes starting at once, one writes the secret
	// and the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readSecret(path)
	}
	if err != nil {
		return "", fmt.Errorf("write the JWT secret: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write the JWT secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write the JWT secret: %w", err)
	}
	slog.Info("generated a JWT secret", "component", "up", "path", path)
	return secret, nil
}

// readSecret reads a secret file, refusing one that others may read.
func readSecret(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, info.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(raw))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}

// standaloneSecret is the secret of a process that has no data directory
// (`api`): $AGENTBUS_JWT_SECRET, or the public development secret when dev
// is explicitly asked for, or an error.
func standaloneSecret(dev bool) (string, error) {
	if s := os.Getenv(jwtSecretEnv); s != "" {
		return s, nil
	}
	if !dev {
		return "", errNoJWTSecret
	}
	slog.Warn(jwtSecretEnv+" is unset and --dev is given: accepting tokens signed with the public development secret", "component", "api")
	return api.DevJWTSecret, nil
}
