package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"

	"github.com/agentbus/agentbus/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	url := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	_ = fs.Parse(args)
	if *url == "" {
		return errors.New("no database: set DATABASE_URL or --database-url")
	}
	version, err := migrations.Apply(ctx, *url)
	if err != nil {
		return err
	}
	slog.Info("database migrated", "component", "migrate", "version", version)
	return nil
}
