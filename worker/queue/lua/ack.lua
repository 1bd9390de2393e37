-- ack: the batch is committed; trim exactly the entries the lease covered.
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  leases  <prefix>:{sN}:leases
-- KEYS[5]  stats   <prefix>:{sN}:stats
-- KEYS[6]  policy  <prefix>:{sN}:policy  the deployment's queue policy (see _lib.lua's policy_of)
-- ARGV[1]   now           (ms), or "" for the server's TIME (unused; kept so every script takes it)
-- ARGV[2]   token         the lease's token
-- ARGV[3]   namespace     its key
-- ARGV[4]   covered       the last entry id the acknowledging lease covered (its own claim's)
-- ARGV[5]   policy        the workers' policy, packed: used where the hash lacks it
--
-- Returns the number of entries removed, or -1 when the token no longer holds the lease or
-- the lease covers other entries (nothing changes then: a zombie worker cannot drop the batch
-- someone else now holds). Only the claim's own `covered` is trimmed up to.
-- Entries that arrived during the lease stay, and re-arm the due time from their own arrivals;
-- when none did, the namespace's meta and log keys are deleted (see _lib.lua).

local ns = ARGV[3]
local m = redis.call('HMGET', KEYS[2], 'token', 'covered')
if m[1] ~= ARGV[2] or m[2] ~= ARGV[4] then
  return -1
end
local cms, cseq = string.match(ARGV[4], '^(%d+)-(%d+)$')
local before = redis.call('XLEN', KEYS[1])
-- MINID drops every id below the one right after `covered`: exactly the covered entries.
redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', tonumber(cms), tonumber(cseq) + 1))
local removed = before - redis.call('XLEN', KEYS[1])
if removed > 0 then
  redis.call('HINCRBY', KEYS[5], scope_of(ns), -removed)
end
redis.call('HDEL', KEYS[2], 'token', 'lease_until', 'lease_from', 'covered', 'count', 'attempts',
  'outages', 'last_error')
lease_rem(KEYS[4], KEYS[3], KEYS[5], ns)

local first, oldest = restore_first(KEYS[1], KEYS[2])
if first then
  local last = tonumber(redis.call('HGET', KEYS[2], 'lms')) or first
  due_add(KEYS[3], KEYS[5], ns, due_at(policy_of(KEYS[6], ARGV[5]), first, last), false)
  redis.call('ZADD', oldest_key(KEYS[5], ns), oldest, ns)
else
  -- The log is empty: the namespace is forgotten until its next arrival (ids stay above it).
  due_rem(KEYS[3], KEYS[5], ns, false)
  forget_empty(KEYS[1], KEYS[2], KEYS[5], ns)
end
return removed
