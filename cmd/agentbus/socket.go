package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/doors"
	"github.com/agentbus/agentbus/doors/localsocket"
)

// socketFile is the local socket's file in a data directory.
const socketFile = "agent.sock"

// runSocket serves the local NDJSON socket for a running deployment: its
// commands go to the deployment's HTTP API with each connection's own
// token, its feeds come from the API's live streams. AGENTBUS_TOKEN is
// used only for the peers of the uids --token-for-uid names.
func runSocket(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("socket", flag.ExitOnError)
	apiURL := fs.String("api", envOr("AGENTBUS_API", "http://127.0.0.1:8080"), "the deployment's API (default $AGENTBUS_API)")
	token := fs.String("token", os.Getenv("AGENTBUS_TOKEN"), "the bearer token the peers of --token-for-uid act with (default $AGENTBUS_TOKEN)")
	var uids uidList
	fs.Var(&uids, "token-for-uid", "a peer of this uid acts with --token without authenticating; repeatable. Without it, every connection authenticates with a token of its own")
	dataDir := fs.String("data-dir", envOr("AGENTBUS_DATA_DIR", ".agentbus"), "where the socket goes unless --socket names it")
	path := fs.String("socket", "", "the socket's file (default <data-dir>/"+socketFile+")")
	_ = fs.Parse(args)
	if len(uids) > 0 && *token == "" {
		return errors.New("socket: --token-for-uid needs a token: set AGENTBUS_TOKEN or --token")
	}
	if *path == "" {
		*path = filepath.Join(*dataDir, socketFile)
	}
	cfg, err := doorConfig()
	if err != nil {
		return err
	}
	remote := func(authz string) localsocket.Caller {
		return localsocket.Caller{API: doors.Remote{Base: *apiURL, Authorization: authz}, Feed: doors.SSEFeed{Base: *apiURL, Authorization: authz}}
	}
	creds := localsocket.Credentials{
		Token: func(ctx context.Context, token string) (localsocket.Caller, error) {
			c := remote("Bearer " + token)
			return c, doors.Authenticate(ctx, c.API)
		},
		ByUID: map[uint32]func() (localsocket.Caller, error){},
	}
	for _, uid := range uids {
		creds.ByUID[uid] = func() (localsocket.Caller, error) { return remote("Bearer " + *token), nil }
	}
	srv, err := serveSocket(*path, cfg.Config, creds)
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// serveSocket listens on path and announces it on standard output with
// seed 002's ready line, {"status":"ready","socketPath":…}.
func serveSocket(path string, cfg doors.Config, creds localsocket.Credentials) (*localsocket.Server, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	srv, err := localsocket.Listen(localsocket.Config{Config: cfg, Path: abs}, creds)
	if err != nil {
		return nil, err
	}
	ready, _ := json.Marshal(map[string]string{"status": "ready", "socketPath": abs})
	fmt.Fprintln(os.Stdout, string(ready))
	return srv, nil
}

// uidUsers is up's repeatable --socket-user-for-uid UID=USER: the users
// the operator maps local socket peers' uids to.
type uidUsers map[uint32]string

func (m uidUsers) String() string {
	parts := make([]string, 0, len(m))
	for uid, user := range m {
		parts = append(parts, fmt.Sprintf("%d=%s", uid, user))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Set adds one UID=USER; the user is a user id (a UUID).
func (m *uidUsers) Set(v string) error {
	rawUID, user, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want UID=USER, got %q", v)
	}
	uid, err := parseUID(rawUID)
	if err != nil {
		return err
	}
	if _, err := uuid.Parse(user); err != nil {
		return fmt.Errorf("the user of uid %d must be a user id (a UUID), got %q", uid, user)
	}
	if *m == nil {
		*m = uidUsers{}
	}
	(*m)[uid] = user
	return nil
}

// uidList is a repeatable flag of uids.
type uidList []uint32

func (l uidList) String() string {
	parts := make([]string, 0, len(l))
	for _, uid := range l {
		parts = append(parts, strconv.FormatUint(uint64(uid), 10))
	}
	return strings.Join(parts, ",")
}

// Set adds one uid.
func (l *uidList) Set(v string) error {
	uid, err := parseUID(v)
	if err == nil {
		*l = append(*l, uid)
	}
	return err
}

func parseUID(v string) (uint32, error) {
	uid, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("a uid is a number, got %q", v)
	}
	return uint32(uid), nil
}
