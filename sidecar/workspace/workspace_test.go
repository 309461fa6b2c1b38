package workspace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/workspace"
)

func TestResolveConfinesEachOwnerToTheirDirectory(t *testing.T) {
	root, err := workspace.New(filepath.Join(t.TempDir(), "ws"))
	require.NoError(t, err)
	alice, bob := uuid.New(), uuid.New()
	home := filepath.Join(string(root), alice.String())
	bobHome, err := root.OwnerDir(bob)
	require.NoError(t, err)
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, "shop"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(home, "escape")))
	require.NoError(t, os.Symlink(bobHome, filepath.Join(home, "bob")))

	ok := map[string]string{
		"":                                 filepath.Join(home, "session-1"),
		"shop":                             filepath.Join(home, "shop"),
		filepath.Join(home, "shop", "new"): filepath.Join(home, "shop", "new"),
		"a/../b":                           filepath.Join(home, "b"),
		home:                               home,
	}
	for requested, want := range ok {
		got, err := root.Resolve(alice, requested, "session-1")
		require.NoError(t, err, requested)
		assert.Equal(t, want, got, requested)
	}
	refused := []string{
		"/",
		outside,
		bobHome,
		filepath.Join(bobHome, "src"),
		"../" + bob.String(),
		"escape",
		"escape/deeper/still",
		"bob/src",
		string(root),
	}
	for _, requested := range refused {
		_, err := root.Resolve(alice, requested, "session-1")
		assert.ErrorIs(t, err, workspace.ErrOutside, requested)
	}
}

func TestCheckSeesASymlinkMadeAfterTheSessionStarted(t *testing.T) {
	root, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	owner := uuid.New()
	dir, err := root.Resolve(owner, "work", "")
	require.NoError(t, err)
	require.NoError(t, root.Check(owner, dir))
	require.NoError(t, os.Symlink("/", dir))
	assert.ErrorIs(t, root.Check(owner, dir), workspace.ErrOutside)
}
