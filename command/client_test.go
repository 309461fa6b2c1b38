package command_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// TestClientDoGetsItsOwnResult sends commands at once from many callers to
// a responder that first answers each on its reply subject with a body
// that is not a result and with another command's result, then with its
// own: every caller gets its own result, and only it.
func TestClientDoGetsItsOwnResult(t *testing.T) {
	t.Parallel()
	_, js, nc := bustest.Server(t)
	sub, err := nc.Subscribe("agents.cmd.>", func(m *nats.Msg) {
		var cmd command.Command
		if json.Unmarshal(m.Data, &cmd) != nil {
			return
		}
		to := m.Header.Get(command.ReplyHeader)
		other, _ := json.Marshal(command.Result{CommandID: uuid.New(), State: json.RawMessage(`"wrong"`)})
		own, _ := json.Marshal(command.Result{CommandID: cmd.ID, State: json.RawMessage(`"` + cmd.ID.String() + `"`)})
		for _, body := range [][]byte{[]byte("not a result"), other, own} {
			_ = nc.Publish(to, body)
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, nc.Flush())
	client, err := command.NewClient(nc, js, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			cmd, err := command.New(domain.AggregateSession, command.PauseSession, uuid.New(), uuid.NewString(), nil)
			if !assert.NoError(t, err) {
				return
			}
			r, err := client.Do(ctx, cmd)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, cmd.ID, r.CommandID)
			assert.JSONEq(t, `"`+cmd.ID.String()+`"`, string(r.State))
		})
	}
	wg.Wait()
}
