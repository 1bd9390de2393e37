-- settle: end a lease without acknowledging it: `release` (give it back), `fail`, or `outage`.
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  leases  <prefix>:{sN}:leases
-- KEYS[5]  dead    <prefix>:{sN}:dead
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   token         the lease's token
-- ARGV[3]   namespace     its key
-- ARGV[4]   mode          "release", "fail" or "outage"
-- ARGV[5]   error         error text (fail, outage)
-- ARGV[6]   max_attempts  attempts before dead-lettering
-- ARGV[7]   backoff_ms    first retry delay (ms); doubles per attempt (or per outage retry)
-- ARGV[8]   max_delay_ms  longest retry delay (ms) after a failure of the batch
-- ARGV[9]   outage_max_ms longest retry delay (ms) after an outage
-- Derived from the due set's name (same hash tag): <prefix>:{sN}:stats, the counters.
--
-- Returns "released", "retry", "dead", or "stale" when the token no longer holds the lease.
-- `release` does not count an attempt (graceful shutdown) and makes the namespace due now.
-- `fail` counts one; at max attempts the namespace is dead-lettered, its candidates kept.
-- `outage` (a dependency was unreachable: not the batch's fault) counts in `outages`, never
-- in `attempts`: the batch retries with a capped backoff for as long as the outage lasts.

local now = server_now(ARGV[1])
local ns = ARGV[3]
local stats = shard_key(KEYS[3], 'due', 'stats')
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[2] then
  return 'stale'
end
redis.call('HDEL', KEYS[2], 'token', 'lease_until', 'lease_from', 'covered', 'count')
lease_rem(KEYS[4], KEYS[3], stats, ns)
local first = restore_first(KEYS[1], KEYS[2])

if ARGV[4] == 'release' then
  if first then
    due_add(KEYS[3], stats, ns, now, false)
  else
    due_rem(KEYS[3], stats, ns, false)
  end
  return 'released'
end

local function due_after(delay)
  if first then
    due_add(KEYS[3], stats, ns, now + math.floor(delay), false)
  else
    due_rem(KEYS[3], stats, ns, false)
  end
end

if ARGV[4] == 'outage' then
  local outages = redis.call('HINCRBY', KEYS[2], 'outages', 1)
  redis.call('HSET', KEYS[2], 'last_error', ARGV[5])
  -- The exponent is capped so 2 ^ n stays a small float whatever the count.
  due_after(math.min(tonumber(ARGV[7]) * 2 ^ math.min(outages - 1, 30), tonumber(ARGV[9])))
  return 'retry'
end

local attempts = redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HSET', KEYS[2], 'last_error', ARGV[5])
if attempts >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[2], 'dead', now)
  dead_add(KEYS[5], stats, ns, now)
  due_rem(KEYS[3], stats, ns, false)
  return 'dead'
end
due_after(math.min(tonumber(ARGV[7]) * 2 ^ (attempts - 1), tonumber(ARGV[8])))
return 'retry'
