package checkpoint_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

// BenchmarkCheckpointPerTurn snapshots a 10 MB working directory of 1,000
// files of which 1 % change between snapshots, and reports the store's
// growth per snapshot next to the time one takes.
func BenchmarkCheckpointPerTurn(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	rng := rand.New(rand.NewPCG(1, 2))
	content := func() []byte {
		buf := make([]byte, 10*1024)
		for i := range buf {
			buf[i] = byte('a' + rng.IntN(26))
		}
		return buf
	}
	for i := 0; i < 1000; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%04d.txt", i))
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(b, os.WriteFile(p, content(), 0o644))
	}
	_, err := store.Take(ctx, dir, "initial")
	require.NoError(b, err)
	before := storeBytes(b, store.Dir)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		for j := 0; j < 10; j++ {
			i := rng.IntN(1000)
			p := filepath.Join(dir, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%04d.txt", i))
			require.NoError(b, os.WriteFile(p, content(), 0o644))
		}
		b.StartTimer()
		if _, err := store.Take(ctx, dir, "turn "+strconv.Itoa(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(storeBytes(b, store.Dir)-before)/float64(b.N), "store-bytes/turn")
}

// storeBytes returns the disk usage of the store's objects.
func storeBytes(b *testing.B, dir string) int64 {
	out, err := exec.Command("du", "-sb", filepath.Join(dir, "objects")).Output()
	require.NoError(b, err)
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	require.NoError(b, err)
	return n
}
