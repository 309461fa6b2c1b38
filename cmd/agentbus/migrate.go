package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"

	"github.com/agentbus/agentbus/postgres/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	url := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	natsURL := fs.String("nats-url", os.Getenv("NATS_URL"), "NATS server whose streams and consumers to provision as the operator (default $NATS_URL; none: the database only)")
	_ = fs.Parse(args)
	if *url == "" {
		return errors.New("no database: set DATABASE_URL or --database-url")
	}
	version, err := migrations.Apply(ctx, *url)
	if err != nil {
		return err
	}
	slog.Info("database migrated", "component", "migrate", "version", version)
	if *natsURL == "" {
		return nil
	}
	// The components' own NATS users may not create streams or consumers:
	// a deployment provisions them here, before they start.
	var in infra
	defer in.Close()
	if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
		return err
	}
	slog.Info("streams and consumers provisioned", "component", "migrate")
	return nil
}
