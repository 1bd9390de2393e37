-- stats_rebuild: recount one shard's set counters and oldest-entry index, once per layout.
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  stats   <prefix>:{sN}:stats
-- KEYS[2]  due     <prefix>:{sN}:due
-- KEYS[3]  leases  <prefix>:{sN}:leases
-- KEYS[4]  dead    <prefix>:{sN}:dead
-- ARGV[1]   version       the counters' layout version (stats field `v`); nothing done when set
-- ARGV[2…]  scopes        the scopes, whose <prefix>:{sN}:oldest:<scope> indexes are rebuilt
--
-- Returns the number of namespaces recounted, or -1 when the shard was already counted.
-- For a shard written by a release that kept no such counters (or a fresh one): O(members of
-- the shard's sets), once; worker start runs it on every shard. The pending counts (the scope
-- fields) were already kept by every release and are left alone, as is the id floor.

if redis.call('HGET', KEYS[1], 'v') == ARGV[1] then
  return -1
end
local base = shard_key(KEYS[1], 'stats', '')
local counts = {}
local function bump(ns, what)
  local field = scope_of(ns) .. ':' .. what
  counts[field] = (counts[field] or 0) + 1
end
for i = 2, #ARGV do
  for _, what in ipairs({'due', 'leased', 'dead', 'parked'}) do
    counts[ARGV[i] .. ':' .. what] = 0
  end
  redis.call('DEL', base .. 'oldest:' .. ARGV[i])
end

local seen = {}
local function visit(ns)
  if seen[ns] then
    return
  end
  seen[ns] = true
  local oldest = first_entry_ms(base .. 'ns:' .. ns .. ':log')
  if oldest then
    redis.call('ZADD', oldest_key(KEYS[1], ns), oldest, ns)
  end
end
for _, ns in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  bump(ns, 'due')
  if redis.call('ZSCORE', KEYS[3], ns) then
    bump(ns, 'parked')
  end
  visit(ns)
end
for _, ns in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  bump(ns, 'leased')
  visit(ns)
end
for _, ns in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  bump(ns, 'dead')
  visit(ns)
end
local n = 0
for field, value in pairs(counts) do
  redis.call('HSET', KEYS[1], field, value)
end
for _ in pairs(seen) do
  n = n + 1
end
redis.call('HSET', KEYS[1], 'v', ARGV[1])
return n
