package netguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckURLRequiresHTTPSUnlessPrivateIsAllowed(t *testing.T) {
	t.Parallel()
	strict := Policy{RequireHTTPS: true, Switch: "X"}
	tests := []struct {
		url, want string
	}{
		{"https://hooks.example.com/in", ""},
		{"http://hooks.example.com/in", "must be an https URL"},
		{"ftp://hooks.example.com/in", "must be an https URL"},
		{"https://127.0.0.1/in", "loopback or private"},
		{"https://10.1.2.3/in", "loopback or private"},
		{"https://169.254.169.254/", "cloud metadata"},
		{"https://[fe80::1]/", "link-local"},
		{"https://169.254.10.10/", "link-local"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got := CheckURL(tt.url, strict)
			if tt.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.want)
			}
		})
	}
}

func TestControlRefusesTheDialledAddress(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	dial := func(p Policy) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A name, resolved by the dialer: only the dialled address is checked.
		_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
		require.NoError(t, err)
		c, err := Dialer(p).DialContext(ctx, "tcp4", net.JoinHostPort("localhost", port))
		if err == nil {
			c.Close()
		}
		return err
	}
	err := dial(Policy{Switch: "X"})
	var refused *RefusedError
	require.ErrorAs(t, err, &refused, "localhost resolves to loopback, which the policy refuses")
	assert.Contains(t, refused.Reason, "loopback or private")
	assert.NoError(t, dial(Policy{AllowPrivate: true}))
}
