package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentbus/agentbus/internal/testenv"
)

// benchDatabase returns the URL of a fresh, migrated database on the tests'
// Postgres server, with pg_stat_statements, so that a benchmark can count
// the statements the stack runs (see pgStatements).
func benchDatabase(b *testing.B) string {
	ctx := context.Background()
	url := testenv.PostgresURL(b)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(b, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	require.NoError(b, err)
	return url
}

// pgStatements returns the statements run so far in conn's database,
// BEGIN and COMMIT included (pg_stat_statements).
func pgStatements(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `
		SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	return n, err
}

// diskFlushes returns the flush requests (fsync, fdatasync, a journal
// commit) that the disk holding dir completed so far, from the block
// layer's counters, the whole machine's; -1 where they cannot be read.
// Concurrent fsyncs may share one flush: this counts what the disk did.
func diskFlushes(dir string) int64 {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return -1
	}
	dev := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	if _, err := os.Stat(filepath.Join(dev, "partition")); err == nil {
		dev = filepath.Join(dev, "..") // a partition's flushes are its disk's
	}
	raw, err := os.ReadFile(filepath.Join(dev, "stat"))
	if err != nil {
		return -1
	}
	// The fields of Documentation/block/stat.rst; the 16th counts flushes.
	f := strings.Fields(string(raw))
	if len(f) < 16 {
		return -1
	}
	n, err := strconv.ParseInt(f[15], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
