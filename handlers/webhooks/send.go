package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/agentbus/agentbus/internal/netguard"
	"github.com/agentbus/agentbus/postgres"
)

// excerptBytes is how much of a receiver's answer the delivery log keeps.
const excerptBytes = 512

// sender posts deliveries to their endpoints.
type sender struct {
	client  *http.Client
	policy  netguard.Policy
	timeout time.Duration
	now     func() time.Time
}

// newSender returns a sender whose connections go only to addresses the
// policy allows, checked on the address dialled after each name
// resolution, through no proxy, following no redirect.
func newSender(policy netguard.Policy, timeout time.Duration) *sender {
	dialer := netguard.Dialer(policy)
	dialer.Timeout = timeout
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: timeout,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &sender{
		client: &http.Client{Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		policy: policy, timeout: timeout, now: time.Now,
	}
}

// attempt posts the claimed delivery once and says what came of it: a
// 2xx answer delivers it; anything else, a refused destination included,
// is a failed attempt.
func (s *sender) attempt(ctx context.Context, d postgres.ClaimedDelivery) (o postgres.AttemptOutcome, delivered bool) {
	start := s.now()
	o.At = start
	if reason := netguard.CheckURL(d.URL, s.policy); reason != "" {
		o.Error = "destination refused: " + reason
		return o, false
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		o.Error = err.Error()
		return o, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentbus-webhooks")
	if err := sign(req.Header, d.EventID, start, d.Body, d.Secrets); err != nil {
		o.Error = "sign: " + err.Error()
		return o, false
	}
	resp, err := s.client.Do(req)
	o.Latency = s.now().Sub(start)
	if err != nil {
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			o.Error = "destination refused: " + refused.Error()
		} else {
			o.Error = err.Error()
		}
		return o, false
	}
	defer resp.Body.Close()
	o.StatusCode = resp.StatusCode
	o.Excerpt = excerpt(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		o.Error = fmt.Sprintf("answered %s", resp.Status)
		return o, false
	}
	return o, true
}

// excerpt reads the start of an answer, cut at a character boundary.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, excerptBytes))
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b)
}
