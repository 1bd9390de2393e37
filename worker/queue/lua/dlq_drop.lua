-- dlq_drop: delete a dead-lettered namespace's pending candidates and clear its dead flag.
--
-- uses _lib.lua (prepended when loaded)
--
-- KEYS[1]  log    <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta   <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due    <prefix>:{sN}:due
-- KEYS[4]  dead   <prefix>:{sN}:dead
-- KEYS[5]  stats  <prefix>:{sN}:stats
-- ARGV[1]  namespace key
--
-- Returns the number of candidates dropped, or -1 when the namespace is not dead-lettered.
-- The last stream id stays in meta, so ids keep increasing; the fence is the shard's counter.

local ns = ARGV[1]
if not redis.call('HGET', KEYS[2], 'dead') then
  return -1
end
local n = redis.call('XLEN', KEYS[1])
redis.call('DEL', KEYS[1])
if n > 0 then
  redis.call('HINCRBY', KEYS[5], scope_of(ns), -n)
end
redis.call('HDEL', KEYS[2], 'dead', 'attempts', 'last_error', 'first')
redis.call('ZREM', KEYS[4], ns)
redis.call('ZREM', KEYS[3], ns)
return n
