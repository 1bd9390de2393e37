-- stats: one shard's queue health, read from its counters: O(scopes), not O(namespaces).
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  stats   <prefix>:{sN}:stats   counters kept by every script (see _lib.lua)
-- KEYS[2]  due     <prefix>:{sN}:due
-- KEYS[3]  leases  <prefix>:{sN}:leases
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   looked_at     most due-by-now namespaces looked at to split them by scope
-- ARGV[3…]  scopes        scopes whose oldest pending entry is read (<prefix>:{sN}:oldest:<scope>)
--
-- Returns {now, due by now in all scopes, looked at, stats hash as a flat list, then per
-- scope (ARGV order) the split of the looked-at ones: scope, due by now (not leased), oldest
-- entry ms or -1}.
-- Only the due set's members with a due time already passed are looked at, at most ARGV[2] of
-- them: the namespaces the next sweep claims, few unless the workers are behind. Waiting
-- (debouncing) namespaces, however many, are counted by the counters alone.

local now = server_now(ARGV[1])
local cap = tonumber(ARGV[2])
local due_now = redis.call('ZCOUNT', KEYS[2], '-inf', now)
local ready = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, cap)
local by_scope = {}
for _, ns in ipairs(ready) do
  -- A parked namespace (leased, due again when its lease ends) counts as leased.
  if not redis.call('ZSCORE', KEYS[3], ns) then
    local scope = scope_of(ns)
    by_scope[scope] = (by_scope[scope] or 0) + 1
  end
end
local out = {now, due_now, #ready, redis.call('HGETALL', KEYS[1])}
for i = 3, #ARGV do
  local scope = ARGV[i]
  local first = redis.call('ZRANGE', shard_key(KEYS[1], 'stats', 'oldest:' .. scope), 0, 0,
    'WITHSCORES')
  out[#out + 1] = {scope, by_scope[scope] or 0, first[2] or -1}
end
return out
