-- Set and log helpers of the scripts that end leases or move namespaces between the due,
-- leases and dead sets; worker/queue/scripts.py prepends it (after _lib.lua, whose counters
-- and key helpers it uses) to each script marked `-- uses _sets.lua`.

-- Another key of the shard `key` belongs to: `key` is a shard key ending in `suffix` (e.g. the
-- due set, "due"); the result carries the same hash tag, so it lives in the same slot.
local function shard_key(key, suffix, name)
  return string.sub(key, 1, #key - #suffix) .. name
end

local function count(stats, ns, what, by)
  redis.call('HINCRBY', stats, scope_of(ns) .. ':' .. what, by)
end

-- The oldest-entry index of the namespace's scope (see _lib.lua's header).
local function oldest_key(stats, ns)
  return shard_key(stats, 'stats', 'oldest:' .. scope_of(ns))
end

-- The ms part of the oldest log entry's id, or nil when the log is empty.
local function first_entry_ms(log)
  local entry = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)[1]
  if entry then
    return tonumber(string.match(entry[1], '^(%d+)'))
  end
  return nil
end

-- After a lease ends, the pending batch starts at the older of `first` (arrivals during the
-- lease) and the oldest remaining entry (beyond max_batch, or an un-acked batch).
-- Returns that start and the oldest entry's ms (both nil when the log is empty).
local function restore_first(log, meta)
  local oldest = first_entry_ms(log)
  if not oldest then
    redis.call('HDEL', meta, 'first')
    return nil, nil
  end
  local first = tonumber(redis.call('HGET', meta, 'first'))
  if not first or oldest < first then
    first = oldest
    redis.call('HSET', meta, 'first', first)
  end
  return first, oldest
end

-- Whether a lease term that began at `from` and runs until `till` (ms, both the server's
-- clock when they were set) still holds at `now`: while the clock reads within
-- [from - (till - from), till). The server's clock is a wall clock, and an NTP step moves it.
-- * Stepped back: `now` reads earlier than the term's own start. A clock read more than one
--   lease length before that start can only come from a step back; how much time really
--   passed since is unknown, so the lease no longer vouches for its holder and is claimable
--   at once (a live holder's next heartbeat would have restarted the term on the new
--   timeline, and restarts it if it comes first). Without this rule a worker that died just
--   before a one-hour step back kept its namespace for an hour. A smaller step back delays
--   the takeover by at most its own size, under a lease length.
-- * Stepped forward: the lease expires early and is taken over while its holder may still be
--   working. That only costs duplicate work: the new holder's token is higher, the old
--   holder's heartbeats and ack are refused, and its commit is fenced in SQL (the namespace's
--   version and the unique ledger), so a batch still merges once.
-- A lease set before `lease_from` existed (nil) holds until `till`, as it did then.
local function lease_holds(now, from, till)
  if till == nil or now >= till then
    return false
  end
  return from == nil or now >= from - (till - from)
end

-- Membership changes of the due, leases and dead sets, counted in the stats hash. `leased`:
-- the namespace holds a lease (token set in meta, which is exactly membership of the leases
-- set), for the parked count. Counters move only when membership does (ZADD/ZREM say so).
local function due_add(due, stats, ns, score, leased, flag)
  local added
  if flag then
    added = redis.call('ZADD', due, flag, score, ns)
  else
    added = redis.call('ZADD', due, score, ns)
  end
  if added == 1 then
    count(stats, ns, 'due', 1)
    if leased then
      count(stats, ns, 'parked', 1)
    end
  end
end

local function due_rem(due, stats, ns, leased)
  if redis.call('ZREM', due, ns) == 1 then
    count(stats, ns, 'due', -1)
    if leased then
      count(stats, ns, 'parked', -1)
    end
  end
end

local function lease_add(leases, due, stats, ns, score)
  if redis.call('ZADD', leases, score, ns) == 1 then
    count(stats, ns, 'leased', 1)
    if redis.call('ZSCORE', due, ns) then
      count(stats, ns, 'parked', 1)
    end
  end
end

local function lease_rem(leases, due, stats, ns)
  if redis.call('ZREM', leases, ns) == 1 then
    count(stats, ns, 'leased', -1)
    if redis.call('ZSCORE', due, ns) then
      count(stats, ns, 'parked', -1)
    end
  end
end

local function dead_add(dead, stats, ns, score)
  if redis.call('ZADD', dead, score, ns) == 1 then
    count(stats, ns, 'dead', 1)
  end
end

local function dead_rem(dead, stats, ns)
  if redis.call('ZREM', dead, ns) == 1 then
    count(stats, ns, 'dead', -1)
  end
end

-- The namespace's log emptied: raise the shard's id floor to its last id, then delete its meta
-- hash and its (empty) log, and take it out of the oldest-entry index. The caller has taken it
-- out of the due, leases and dead sets.
local function forget_empty(log, meta, stats, ns)
  local m = redis.call('HMGET', meta, 'lms', 'lseq')
  local lms, lseq = tonumber(m[1]), tonumber(m[2])
  if lms then
    local f = redis.call('HMGET', stats, 'floor_ms', 'floor_seq')
    local fms, fseq = tonumber(f[1]), tonumber(f[2])
    if not fms or lms > fms or (lms == fms and lseq > fseq) then
      redis.call('HSET', stats, 'floor_ms', lms, 'floor_seq', lseq)
    end
  end
  redis.call('DEL', meta, log)
  redis.call('ZREM', oldest_key(stats, ns), ns)
end
