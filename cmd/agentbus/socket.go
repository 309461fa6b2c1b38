package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbus/agentbus/doors"
	"github.com/agentbus/agentbus/doors/localsocket"
)

// socketFile is the local socket's file in a data directory.
const socketFile = "agent.sock"

// runSocket serves the local NDJSON socket for a running deployment: its
// commands go to the deployment's HTTP API with the caller's token, its
// feeds come from the API's live streams.
func runSocket(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("socket", flag.ExitOnError)
	apiURL := fs.String("api", envOr("AGENTBUS_API", "http://127.0.0.1:8080"), "the deployment's API (default $AGENTBUS_API)")
	token := fs.String("token", os.Getenv("AGENTBUS_TOKEN"), "your bearer token (default $AGENTBUS_TOKEN)")
	dataDir := fs.String("data-dir", envOr("AGENTBUS_DATA_DIR", ".agentbus"), "where the socket goes unless --socket names it")
	path := fs.String("socket", "", "the socket's file (default <data-dir>/"+socketFile+")")
	_ = fs.Parse(args)
	if *token == "" {
		return errors.New("no token: set AGENTBUS_TOKEN or --token")
	}
	if *path == "" {
		*path = filepath.Join(*dataDir, socketFile)
	}
	cfg, err := doorConfig()
	if err != nil {
		return err
	}
	authz := "Bearer " + *token
	srv, err := serveSocket(*path, cfg.Config, func() (doors.API, error) {
		return doors.Remote{Base: *apiURL, Authorization: authz}, nil
	}, doors.SSEFeed{Base: *apiURL, Authorization: authz})
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// serveSocket listens on path and announces it on standard output with
// seed 002's ready line, {"status":"ready","socketPath":…}.
func serveSocket(path string, cfg doors.Config, caller func() (doors.API, error), feed doors.Feed) (*localsocket.Server, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	srv, err := localsocket.Listen(localsocket.Config{Config: cfg, Path: abs}, caller, feed)
	if err != nil {
		return nil, err
	}
	ready, _ := json.Marshal(map[string]string{"status": "ready", "socketPath": abs})
	fmt.Fprintln(os.Stdout, string(ready))
	return srv, nil
}
