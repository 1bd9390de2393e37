-- dlq_drop: delete a dead-lettered namespace's pending candidates and clear its dead flag.
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log    <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta   <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due    <prefix>:{sN}:due
-- KEYS[4]  dead   <prefix>:{sN}:dead
-- KEYS[5]  stats  <prefix>:{sN}:stats
-- ARGV[1]   namespace     its key
--
-- Returns the number of candidates dropped, or -1 when the namespace is not dead-lettered.
-- The meta hash and the log are deleted; the last stream id raises the shard's id floor, so
-- ids keep increasing (see _lib.lua); the fence is the shard's counter.

local ns = ARGV[1]
if not redis.call('HGET', KEYS[2], 'dead') then
  return -1
end
local n = redis.call('XLEN', KEYS[1])
if n > 0 then
  redis.call('HINCRBY', KEYS[5], scope_of(ns), -n)
end
dead_rem(KEYS[4], KEYS[5], ns)
due_rem(KEYS[3], KEYS[5], ns, false)
forget_empty(KEYS[1], KEYS[2], KEYS[5], ns)
return n
