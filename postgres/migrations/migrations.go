// Package migrations holds agentbus's SQL schema as numbered migration
// files, embedded into the binary and applied in order, each inside its
// own transaction, by `agentbus migrate` and at `agentbus up`.
//
// The library is jackc/tern: it speaks pgx natively, keeps the applied
// version in a table (schema_version) and serialises concurrent migrators
// with an advisory lock, so several processes may start at once.
package migrations

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable is the table that records the applied schema version.
const VersionTable = "schema_version"

// Apply brings the database at url up to the newest schema version and
// returns that version.
func Apply(ctx context.Context, url string) (int32, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect for migration: %w", err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return 0, err
	}
	if err := m.LoadMigrations(files); err != nil {
		return 0, fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return m.GetCurrentVersion(ctx)
}

// Latest returns the number of migrations embedded in the binary.
func Latest() (int32, error) {
	names, err := migrate.FindMigrations(files)
	return int32(len(names)), err
}
