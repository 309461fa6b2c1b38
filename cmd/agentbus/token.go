package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/agentbus/agentbus/api"
)

// jwtSecret returns AGENTBUS_JWT_SECRET, or the public development secret
// api.DevJWTSecret when it is unset.
func jwtSecret() string {
	if s := os.Getenv("AGENTBUS_JWT_SECRET"); s != "" {
		return s
	}
	return api.DevJWTSecret
}

// runToken prints a bearer token for a user, signed with the secret the api
// verifies with: a development convenience for curl and the docs page.
func runToken(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("token", flag.ExitOnError)
	user := fs.String("user", "", "the user id, the token's sub (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agentbus token --user <id> [--ttl 24h]\n\n"+
			"Prints an HS256 bearer token signed with $AGENTBUS_JWT_SECRET, or, when it is unset,\n"+
			"with the public development secret (never use that one outside a developer's machine).")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if *user == "" {
		fs.Usage()
		return errors.New("token: --user is required")
	}
	tok, err := api.NewToken(jwtSecret(), *user, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
