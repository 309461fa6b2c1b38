package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
)

// runToken prints a bearer token for a user, signed with the secret the api
// verifies with: a development convenience for curl and the docs page.
func runToken(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("token", flag.ExitOnError)
	user := fs.String("user", "", "the user id, the token's sub (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	dataDir := fs.String("data-dir", envOr("AGENTBUS_DATA_DIR", ".agentbus"), "the data directory of the `agentbus up` whose secret signs the token")
	dev := fs.Bool("dev", false, "sign with the public development secret, for an `agentbus api --dev`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agentbus token --user <id> [--ttl 24h] [--data-dir .agentbus | --dev]\n\n"+
			"Prints an HS256 bearer token signed with $AGENTBUS_JWT_SECRET, or, when it is unset, with the\n"+
			"secret `agentbus up` generated in its data directory (or, with --dev, the public development secret).\n"+
			"It carries the iss and aud $AGENTBUS_JWT_ISSUER and $AGENTBUS_JWT_AUDIENCE set, which the API then requires.")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if *user == "" {
		fs.Usage()
		return errors.New("token: --user is required")
	}
	var secret string
	var err error
	if *dev {
		secret, err = standaloneSecret(true)
	} else {
		secret, err = dataDirSecret(*dataDir, false)
	}
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	tok, err := signToken(secret, *user, *ttl)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
