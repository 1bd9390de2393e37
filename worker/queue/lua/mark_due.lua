-- mark_due: make a namespace due now, debounce or not (reconcile by hand).
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log   <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta  <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due   <prefix>:{sN}:due
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   namespace     its key
-- Derived from the due set's name (same hash tag): <prefix>:{sN}:stats, the counters.
--
-- Returns 1 when the namespace will be swept: due now, or parked until its current lease ends
-- (a lease that no longer holds, see _sets.lua's lease_holds, is no reason to wait);
-- 0 when it has nothing pending or is dead-lettered (retry it first).

local now = server_now(ARGV[1])
local m = redis.call('HMGET', KEYS[2], 'token', 'lease_until', 'dead', 'lease_from')
if m[3] or redis.call('XLEN', KEYS[1]) == 0 then
  return 0
end
local at = now
if m[1] and lease_holds(now, tonumber(m[4]), tonumber(m[2])) then
  at = tonumber(m[2])
end
due_add(KEYS[3], shard_key(KEYS[3], 'due', 'stats'), ARGV[2], at, m[1] ~= nil)
return 1
