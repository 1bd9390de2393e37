-- extend: heartbeat; start a new lease term, from now to now + lease length, if the token still
-- holds the lease. The term's start is recorded (lease_from), so a lease survives a step of
-- the server's clock (see _sets.lua's lease_holds): a heartbeat after a step back restarts the
-- term on the new timeline.
--
-- uses _lib.lua (prepended when loaded)
--
-- KEYS[1]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[2]  leases  <prefix>:{sN}:leases
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   lease_ms      lease length
-- ARGV[3]   token         the lease's token
-- ARGV[4]   namespace     its key
--
-- Returns 1, or 0 when the token no longer holds the lease (taken over, acked, purged).

if redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then
  return 0
end
local now = server_now(ARGV[1])
local lease_until = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease_until', lease_until, 'lease_from', now)
-- XX: only moves the expiry of a member (the token holds the lease, so it is one); never
-- adds one, so the leased count in the stats hash stays exact.
redis.call('ZADD', KEYS[2], 'XX', lease_until, ARGV[4])
return 1
