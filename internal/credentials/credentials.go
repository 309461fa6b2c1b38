// Package credentials keeps what a data directory of `agentbus up` holds
// for its private servers: one generated password per name, and the
// operator's connection URLs in credentials.env. Every file is mode 0600,
// in a directory no sandbox mounts, so only the operator's user and the
// processes of agentbus read them.
package credentials

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// EnvFile is the operator's file of connection URLs in a data directory,
// one NAME=value line each (DATABASE_URL, REDIS_URL, NATS_URL), as
// agentbus itself takes them from the environment.
const EnvFile = "credentials.env"

// dir is the folder of a data directory that holds the generated passwords.
const dir = "credentials"

// Password returns the password kept under name in dataDir, generating a
// random one on the first call. Two processes asking at once get the same
// one: the first to create the file wins and the other reads it.
func Password(dataDir, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("credentials: bad name %q", name)
	}
	folder := filepath.Join(dataDir, dir)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return "", fmt.Errorf("credentials: %w", err)
	}
	path := filepath.Join(folder, name)
	if secret, err := read(path); !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("credentials: generate %s: %w", name, err)
	}
	secret := hex.EncodeToString(buf)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return read(path)
	}
	if err != nil {
		return "", fmt.Errorf("credentials: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("credentials: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("credentials: %w", err)
	}
	return secret, f.Close()
}

// read reads a secret file, refusing one that others may read.
func read(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("credentials: %s is readable by others (mode %v): chmod 600 it", path, info.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(raw))
	if secret == "" {
		return "", fmt.Errorf("credentials: %s is empty", path)
	}
	return secret, nil
}

// WriteEnv sets the given variables in dataDir's credentials.env, keeping
// the others it holds; the file is replaced at once (mode 0600), never
// left half-written.
func WriteEnv(dataDir string, vars map[string]string) error {
	env, err := ReadEnv(dataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range vars {
		if strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
			return fmt.Errorf("credentials: bad variable %q", k)
		}
		env[k] = v
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# The operator's credentials for the servers of this data directory,\n# written by agentbus up. Load them with: set -a; . ./" + EnvFile + "; set +a\n")
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%s\n", k, env[k])
	}
	tmp, err := os.CreateTemp(dataDir, "."+EnvFile+"-*")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dataDir, EnvFile))
}

// ReadEnv reads dataDir's credentials.env; blank lines and lines starting
// with # are skipped. It refuses a file that others may read.
func ReadEnv(dataDir string) (map[string]string, error) {
	path := filepath.Join(dataDir, EnvFile)
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials: %s is readable by others (mode %v): chmod 600 it", path, info.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("credentials: %s: a line without '=': %q", path, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}
