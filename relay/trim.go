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
// It returns the number of entries removed.
var trimAcked = redis.NewScript(`
local function before(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return 0 end
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
if keep > 0 then
  local kept = redis.call('XREVRANGE', KEYS[1], '(' .. bound, '-', 'COUNT', keep)
  if #kept < keep then return 0 end
  bound = kept[#kept][1]
end
return redis.call('XTRIM', KEYS[1], 'MINID', bound)
`)

// Trim trims a session's event and command streams below the oldest entry
// every consumer group acknowledged, keeping keep acknowledged entries as
// history. It returns the number of entries removed.
func Trim(ctx context.Context, rdb redis.Scripter, sessionID string, keep int64) (int64, error) {
	var total int64
	for _, key := range []string{EventsKey(sessionID), CommandsKey(sessionID)} {
		n, err := trimAcked.Run(ctx, rdb, []string{key}, keep).Int64()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// trimmer trims the streams of the held sessions every TrimInterval.
func (r *Relay) trimmer(ctx context.Context) {
	t := time.NewTicker(r.cfg.TrimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range r.Held() {
			n, err := Trim(ctx, r.rdb, id, r.cfg.TrimKeep)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("trimming failed", "session_id", id, "err", err)
				}
				break
			}
			if n > 0 {
				r.log.Debug("trimmed", "session_id", id, "entries", n)
			}
		}
	}
}
