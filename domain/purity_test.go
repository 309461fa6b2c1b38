package domain_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDomainImportsNoInfrastructure keeps the package pure: no NATS,
// Redis, SQL driver or HTTP package may appear among its dependencies.
func TestDomainImportsNoInfrastructure(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	forbidden := []string{"nats-io", "redis", "jackc/pgx", "lib/pq", "net/http"}
	for _, dep := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, f := range forbidden {
			require.NotContains(t, dep, f)
		}
		require.NotEqual(t, "database/sql", dep, "SQL belongs to the repositories")
	}
}
