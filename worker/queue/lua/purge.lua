-- purge: erase everything the queue holds for one namespace (a user asked to be forgotten).
--
-- uses _lib.lua (prepended when loaded)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  leases  <prefix>:{sN}:leases
-- KEYS[5]  dead    <prefix>:{sN}:dead
-- KEYS[6]  stats   <prefix>:{sN}:stats
-- ARGV[1]  namespace key
--
-- Returns the number of candidates erased. A worker holding a lease finds its token gone:
-- its ack and heartbeats are refused.

local ns = ARGV[1]
local n = redis.call('XLEN', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ns)
redis.call('ZREM', KEYS[4], ns)
redis.call('ZREM', KEYS[5], ns)
if n > 0 then
  redis.call('HINCRBY', KEYS[6], scope_of(ns), -n)
end
return n
