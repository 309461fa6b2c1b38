package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/relay"
)

// maxLaggingSessions bounds the session_id label: only the sessions whose
// oldest unforwarded entry is oldest get a series of their own.
const maxLaggingSessions = 20

var (
	relayLag = prometheus.NewDesc("agentbus_relay_lag_seconds",
		"Age of the session's oldest sidecar event not yet on JetStream (the most lagging sessions only).", []string{"session_id"}, nil)
	relayUnforwarded = prometheus.NewDesc("agentbus_relay_unforwarded_entries",
		"Sidecar events of the session not yet on JetStream (the most lagging sessions only).", []string{"session_id"}, nil)
	relayMaxLag = prometheus.NewDesc("agentbus_relay_max_lag_seconds",
		"Age of the oldest sidecar event of any session not yet on JetStream.", nil, nil)
	relayLagging = prometheus.NewDesc("agentbus_relay_lagging_sessions",
		"Sessions with sidecar events not yet on JetStream.", nil, nil)
)

// Relay collects, at each scrape, how far the relay is behind on each
// session's Redis event stream: the entries its consumer group has not
// acknowledged (read and pending, or not read yet).
type Relay struct {
	Redis redis.UniversalClient
	// Group is the relay's consumer group; default relay.DefaultGroup.
	Group string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

type sessionLag struct {
	id     string
	oldest time.Time
	count  int64
}

// Describe implements prometheus.Collector.
func (c Relay) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{relayLag, relayUnforwarded, relayMaxLag, relayLagging} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c Relay) Collect(ch chan<- prometheus.Metric) {
	lags, err := c.lags()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(relayMaxLag, err)
		return
	}
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	slices.SortFunc(lags, func(a, b sessionLag) int { return a.oldest.Compare(b.oldest) })
	maxLag := 0.0
	if len(lags) > 0 {
		maxLag = max(now.Sub(lags[0].oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(relayMaxLag, prometheus.GaugeValue, maxLag)
	ch <- prometheus.MustNewConstMetric(relayLagging, prometheus.GaugeValue, float64(len(lags)))
	for _, l := range lags[:min(len(lags), maxLaggingSessions)] {
		ch <- prometheus.MustNewConstMetric(relayLag, prometheus.GaugeValue, max(now.Sub(l.oldest).Seconds(), 0), l.id)
		ch <- prometheus.MustNewConstMetric(relayUnforwarded, prometheus.GaugeValue, float64(l.count), l.id)
	}
}

func (c Relay) lags() ([]sessionLag, error) {
	ctx, cancel := scrapeContext()
	defer cancel()
	group := cmp.Or(c.Group, relay.DefaultGroup)
	var out []sessionLag
	iter := c.Redis.ScanType(ctx, 0, relay.EventsKey("*"), 500, "stream").Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		id, ok := strings.CutPrefix(key, "agent:session:{")
		if id, ok = strings.CutSuffix(id, "}"); !ok {
			continue // the commands stream
		}
		l, err := c.sessionLag(key, group)
		if err != nil {
			return nil, err
		}
		if l.count > 0 {
			l.id = id
			out = append(out, l)
		}
	}
	return out, iter.Err()
}

// sessionLag reads the oldest entry the group has not acknowledged: the
// oldest pending one, else the first after the last delivered; with no
// group yet, the stream's first.
func (c Relay) sessionLag(key, group string) (sessionLag, error) {
	ctx, cancel := scrapeContext()
	defer cancel()
	groups, err := c.Redis.XInfoGroups(ctx, key).Result()
	if err != nil && !strings.Contains(err.Error(), "no such key") {
		return sessionLag{}, err
	}
	var g *redis.XInfoGroup
	for i := range groups {
		if groups[i].Name == group {
			g = &groups[i]
		}
	}
	if g == nil {
		n, err := c.Redis.XLen(ctx, key).Result()
		if err != nil || n == 0 {
			return sessionLag{}, err
		}
		first, err := c.Redis.XRangeN(ctx, key, "-", "+", 1).Result()
		if err != nil || len(first) == 0 {
			return sessionLag{}, err
		}
		return sessionLag{oldest: entryTime(first[0].ID), count: n}, nil
	}
	l := sessionLag{count: g.Pending + max(g.Lag, 0)}
	if l.count == 0 {
		return l, nil
	}
	if g.Pending > 0 {
		p, err := c.Redis.XPending(ctx, key, group).Result()
		if err != nil {
			return sessionLag{}, err
		}
		l.oldest = entryTime(p.Lower)
		return l, nil
	}
	next, err := c.Redis.XRangeN(ctx, key, "("+g.LastDeliveredID, "+", 1).Result()
	if err != nil || len(next) == 0 {
		return sessionLag{}, err
	}
	l.oldest = entryTime(next[0].ID)
	return l, nil
}

// entryTime is the time in a Redis stream entry id (<unix ms>-<seq>).
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}
