package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAPITypeScriptClient proves the OpenAPI document is usable by a
// UI: openapi-typescript generates client types from it and tsc
// type-checks testdata/ts/usage.ts against them. The tools' versions are
// pinned in testdata/ts/package-lock.json and installed into a temporary
// directory from the npm registry.
func TestOpenAPITypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages; skipped with -short")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx (Node.js) is not installed, so the generated TypeScript client cannot be checked")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm (Node.js) is not installed, so the generated TypeScript client cannot be checked")
	}
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json", "usage.ts"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ts", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	doc, err := OpenAPIDocument(Config{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.json"), doc, 0o644))

	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "NPM_CONFIG_FUND=false", "NPM_CONFIG_AUDIT=false")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v:\n%s", name, args, out)
	}
	run("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	run("npx", "--no-install", "openapi-typescript", "openapi.json", "--output", "schema.d.ts")
	run("npx", "--no-install", "tsc", "--noEmit", "-p", ".")
}
