package relay

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// trimAcked trims stream KEYS[1] below the oldest entry that some consumer
// group has not acknowledged, keeping ARGV[1] acknowledged entries below it
// as history. Redis 7.0 has no XTRIM ... ACKED, so the bound is computed
// here: for each group, its oldest pending entry (XPENDING), or, with none
// pending, the id just after its last delivered entry (everything up to it
// is acknowledged); the lowest over all groups is kept, with everything
// above it. A stream without
// a group is left alone: who reads it, and how far, is unknown. Being one
// script, nothing can be read or acknowledged between the bound and the trim.
// It returns the number of entries removed, and 1 when more than ARGV[1]
// entries are left (some held back by a group that has not acknowledged
// them, so a later trim may remove more with nothing written), else 0.
var trimAcked = redis.NewScript(`
local function before(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return {0, 0} end
local bound
for _, g in ipairs(groups) do
  local name, pending, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1]
    elseif g[i] == 'pending' then pending = g[i + 1]
    elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  local b
  if pending > 0 then
    b = redis.call('XPENDING', KEYS[1], name)[2]
  else
    -- Everything up to the last delivered entry is acknowledged.
    local ms, seq = string.match(last, '^(%d+)-(%d+)$')
    b = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
  end
  if bound == nil or before(b, bound) then bound = b end
end
local keep = tonumber(ARGV[1])
local more = 0
if redis.call('XLEN', KEYS[1]) > keep then more = 1 end
if keep > 0 then
  local kept = redis.call('XREVRANGE', KEYS[1], '(' .. bound, '-', 'COUNT', keep)
  if #kept < keep then return {0, more} end
  bound = kept[#kept][1]
end
local removed = redis.call('XTRIM', KEYS[1], 'MINID', bound)
if redis.call('XLEN', KEYS[1]) <= keep then more = 0 end
return {removed, more}
`)

// Trim trims a session's event and command streams below the oldest entry
// every consumer group acknowledged, keeping keep acknowledged entries as
// history. It returns the number of entries removed.
func Trim(ctx context.Context, rdb redis.Scripter, sessionID string, keep int64) (int64, error) {
	n, _, err := trim(ctx, rdb, sessionID, keep)
	return n, err
}

// trim is Trim, also reporting whether a later trim may remove more with
// nothing written in between.
func trim(ctx context.Context, rdb redis.Scripter, sessionID string, keep int64) (removed int64, more bool, err error) {
	for _, key := range []string{EventsKey(sessionID), CommandsKey(sessionID)} {
		res, err := trimAcked.Run(ctx, rdb, []string{key}, keep).Int64Slice()
		if err != nil {
			return removed, more, err
		}
		removed += res[0]
		more = more || res[1] == 1
	}
	return removed, more, nil
}

// trimmer trims, every TrimInterval, the streams of the held sessions that
// grew since the last time, or that a reader still holds back: a stream
// nothing was written to and holding no more than TrimKeep entries has
// nothing to trim, so the cost follows the traffic, not the sessions held.
func (r *Relay) trimmer(ctx context.Context) {
	t := time.NewTicker(r.cfg.TrimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.touchedMu.Lock()
		ids := r.touched
		r.touched = map[string]struct{}{}
		r.touchedMu.Unlock()
		held := map[string]bool{}
		for _, id := range r.Held() {
			held[id] = true
		}
		for id := range ids {
			if !held[id] {
				continue
			}
			n, more, err := trim(ctx, r.rdb, id, r.cfg.TrimKeep)
			if err != nil && ctx.Err() == nil {
				r.log.Warn("trimming failed", "session_id", id, "err", err)
			}
			if err != nil || more {
				// Tried again next time.
				r.touch(id)
			}
			if n > 0 {
				r.log.Debug("trimmed", "session_id", id, "entries", n)
			}
		}
	}
}
