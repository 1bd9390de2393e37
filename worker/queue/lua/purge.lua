-- purge: erase everything the queue holds for one namespace (a user asked to be forgotten).
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  leases  <prefix>:{sN}:leases
-- KEYS[5]  dead    <prefix>:{sN}:dead
-- KEYS[6]  stats   <prefix>:{sN}:stats
-- ARGV[1]   namespace     its key
-- ARGV[2]   now           (ms), or "" for the server's TIME (only tests send a value)
--
-- Returns the number of candidates erased, or -1 (nothing erased) when a worker holds a lease
-- on the namespace that still holds (_sets.lua's lease_holds: unexpired, and not begun after a
-- step back of the server's clock): checked and erased in one step, so no claim slips in
-- between. A worker whose lease expired finds its token gone: its ack and heartbeats are
-- refused, and its commit is refused by the SQL fence the erase takes. The shard's fence
-- counter (<prefix>:{sN}:fence) is not touched, so tokens are never issued twice, and the
-- last stream id raises the shard's id floor, so ids are never issued twice either.

local ns = ARGV[1]
local m = redis.call('HMGET', KEYS[2], 'token', 'lease_until', 'lease_from')
if m[1] and lease_holds(server_now(ARGV[2]), tonumber(m[3]), tonumber(m[2]) or 0) then
  return -1
end
local n = redis.call('XLEN', KEYS[1])
lease_rem(KEYS[4], KEYS[3], KEYS[6], ns)
due_rem(KEYS[3], KEYS[6], ns, false)
dead_rem(KEYS[5], KEYS[6], ns)
forget_empty(KEYS[1], KEYS[2], KEYS[6], ns)
if n > 0 then
  redis.call('HINCRBY', KEYS[6], scope_of(ns), -n)
end
return n
