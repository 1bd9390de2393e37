-- claim: lease due namespaces of one shard (or one named namespace, at once).
--
-- uses _lib.lua (prepended when loaded)
-- uses _sets.lua (prepended after it)
--
-- KEYS[1]  due     <prefix>:{sN}:due
-- KEYS[2]  leases  <prefix>:{sN}:leases
-- KEYS[3]  dead    <prefix>:{sN}:dead
-- KEYS[4]  fence   <prefix>:{sN}:fence   lease tokens; never deleted by any script
-- KEYS[5]  epoch   <prefix>:{sN}:epoch   this shard's identity; created here when missing
-- KEYS[6]  policy  <prefix>:{sN}:policy  the deployment's queue policy
-- ARGV[1]   now           (ms), or "" for the server's TIME (only tests send a value)
-- ARGV[2]   lease_ms      lease length (a lease records its term: lease_from, lease_until)
-- ARGV[3]   max_batch     entries one claim covers, at most
-- ARGV[4]   limit         most claims made
-- ARGV[5]   max_attempts  attempts before dead-lettering
-- ARGV[6]   base          shard base "<prefix>:{sN}:"; the script derives namespace keys from it.
--                         They carry the shard's hash tag: the same Cluster slot as KEYS.
-- ARGV[7]   namespace     to claim now whatever its due time, or "" to sweep the shard
-- ARGV[8]   policy        the workers' policy, packed (worker/types.py),
--                         written when the shard has none (a restart or flush lost it)
-- Derived from the shard base: <prefix>:{sN}:stats (counters) and :oldest:<scope>.
--
-- Returns a list of {namespace, token, covered id, count, attempts, due at (ms), epoch}.
-- The epoch is created (from the server's TIME) when the key is missing: a fresh deployment,
-- or a Redis that lost its data. The fence counter, when missing, starts at now * 1000, so a
-- token issued after such a loss is still above every token issued before it. "due at"
-- is when the namespace became claimable: its score in the due set (the debounced due time),
-- the expiry (lease_until) of an expired lease taken over, or now for a namespace claimed by
-- name before it was due. Claim time minus it is the due lag.
--
-- Candidates: expired leases (crash recovery without a reaper), leases that no longer hold
-- because the server's clock stepped back past their start (_sets.lua's lease_holds; found as
-- the leases whose expiry lies more than one lease length ahead, furthest first), and
-- namespaces due by now. A leased namespace is parked (due again when its lease ends); a lease
-- taken over counts as a failed attempt, so a batch that keeps killing its workers ends up
-- dead-lettered. A lease taken over after a step back reports `now` as its due time (its
-- expiry lies ahead).

local now = server_now(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local max_batch = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local max_attempts = tonumber(ARGV[5])
local base = ARGV[6]
local stats = base .. 'stats'
local EXPIRED = 'lease expired: the worker holding it stopped heartbeating (crashed or stuck)'
local STEPPED = 'lease given up: the Redis server clock stepped back past its start (an NTP ' ..
  'step?), so the time its holder has been silent is unknown'

local epoch = redis.call('GET', KEYS[5])
if not epoch then
  local t = redis.call('TIME')
  epoch = string.format('%x%05x', tonumber(t[1]), tonumber(t[2]))
  redis.call('SET', KEYS[5], epoch)
end
if redis.call('EXISTS', KEYS[6]) == 0 then
  for i, field in ipairs(policy_fields()) do
    redis.call('HSET', KEYS[6], field, (struct.unpack('>d', ARGV[8], 8 * i - 7)))
  end
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('SET', KEYS[4], string.format('%d', now * 1000))
end

-- due: the namespace's score in the due set when the caller read it (nil: not read).
local function try_claim(ns, due)
  local meta = base .. 'ns:' .. ns .. ':meta'
  local log = base .. 'ns:' .. ns .. ':log'
  local m = redis.call('HMGET', meta, 'token', 'lease_until', 'dead', 'attempts', 'lease_from')
  local attempts = tonumber(m[4]) or 0
  if m[3] then
    due_rem(KEYS[1], stats, ns, m[1] ~= nil)
    lease_rem(KEYS[2], KEYS[1], stats, ns)
    return nil
  end
  if m[1] then
    local lease_until = tonumber(m[2]) or 0
    if lease_holds(now, tonumber(m[5]), lease_until) then
      due_add(KEYS[1], stats, ns, lease_until, true)
      return nil
    end
    -- Claimable again since its lease expired, or stopped holding when the clock stepped
    -- back (its earlier due time was already claimed).
    local why = EXPIRED
    if lease_until > now then
      why = STEPPED
    end
    due = math.min(lease_until, now)
    attempts = attempts + 1
    redis.call('HDEL', meta, 'token', 'lease_until', 'lease_from', 'covered', 'count')
    redis.call('HSET', meta, 'attempts', attempts, 'last_error', why)
    lease_rem(KEYS[2], KEYS[1], stats, ns)
    if attempts >= max_attempts then
      redis.call('HSET', meta, 'dead', now)
      dead_add(KEYS[3], stats, ns, now)
      due_rem(KEYS[1], stats, ns, false)
      return nil
    end
  end
  local n = redis.call('XLEN', log)
  if n == 0 then
    due_rem(KEYS[1], stats, ns, false)
    forget_empty(log, meta, stats, ns)
    return nil
  end
  local count = math.min(n, max_batch)
  local covered
  if count == n then
    covered = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)[1][1]
  else
    -- Only with a backlog beyond max_batch: streams have no index access, so read to it.
    covered = redis.call('XRANGE', log, '-', '+', 'COUNT', count)[count][1]
  end
  if due == nil then
    due = tonumber(redis.call('ZSCORE', KEYS[1], ns))
  end
  if due == nil or due > now then
    due = now  -- claimed by name before it was due (or not in the due set at all)
  end
  local token = redis.call('INCR', KEYS[4])
  local lease_until = now + lease_ms
  redis.call('HSET', meta, 'token', token, 'lease_until', lease_until, 'lease_from', now,
    'covered', covered, 'count', count)
  -- Arrivals from now on form the next batch, with their own debounce window.
  redis.call('HDEL', meta, 'first')
  due_rem(KEYS[1], stats, ns, false)
  lease_add(KEYS[2], KEYS[1], stats, ns, lease_until)
  return {ns, token, covered, count, attempts, due, epoch}
end

local claims = {}
local seen = {}
local function visit(ns, due)
  if seen[ns] or #claims >= limit then
    return
  end
  seen[ns] = true
  local claim = try_claim(ns, due)
  if claim then
    claims[#claims + 1] = claim
  end
end

if ARGV[7] ~= '' then
  visit(ARGV[7])
else
  for _, ns in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)) do
    visit(ns)
  end
  -- A lease that expires more than one lease length from now began after now: the clock
  -- stepped back since. Visited when its own term says it no longer holds (a worker with a
  -- longer lease setting is left alone).
  local ahead = redis.call('ZREVRANGEBYSCORE', KEYS[2], '+inf', '(' .. (now + lease_ms),
    'LIMIT', 0, limit)
  for _, ns in ipairs(ahead) do
    local l = redis.call('HMGET', base .. 'ns:' .. ns .. ':meta', 'lease_from', 'lease_until')
    if not lease_holds(now, tonumber(l[1]), tonumber(l[2])) then
      visit(ns)
    end
  end
  local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #ready, 2 do
    visit(ready[i], tonumber(ready[i + 1]))
  end
end
return claims
