-- dlq_retry: bring a dead-lettered namespace back: attempts cleared, due now.
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log   <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta  <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due   <prefix>:{sN}:due
-- KEYS[4]  dead  <prefix>:{sN}:dead
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   namespace     its key
-- Derived from the due set's name (same hash tag): <prefix>:{sN}:stats, the counters.
--
-- Returns 1, or 0 when the namespace is not dead-lettered.

if not redis.call('HGET', KEYS[2], 'dead') then
  return 0
end
local stats = shard_key(KEYS[3], 'due', 'stats')
redis.call('HDEL', KEYS[2], 'dead', 'attempts', 'last_error')
dead_rem(KEYS[4], stats, ARGV[2])
if restore_first(KEYS[1], KEYS[2]) then
  due_add(KEYS[3], stats, ARGV[2], server_now(ARGV[1]), false)
end
return 1
