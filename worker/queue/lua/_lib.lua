-- Helpers shared by the queue scripts; worker/queue/scripts.py prepends this file to each one.
--
-- Meta hash fields of a namespace (<prefix>:{sN}:ns:<ns>:meta):
--   first        ms of the first arrival of the batch not yet claimed (unset: none, or claimed)
--   lms, lseq    the last stream id issued (so `lms` is the latest arrival); ids keep
--                increasing even after trims and drops
--   (fence)      not here: lease tokens come from the shard's counter <prefix>:{sN}:fence,
--                which no script ever deletes, so a token is never issued twice in one epoch
--   token        fence of the current lease (unset: not leased)
--   lease_until  ms when the current lease expires unless extended
--   covered      id of the last log entry the current lease covers
--   count        how many log entries the current lease covers
--   attempts     failed (or abandoned) attempts of the current batch
--   outages      retries of the current batch after a dependency was unreachable (not counted
--                toward dead-lettering)
--   last_error   why the last attempt failed
--   dead         ms when the namespace was dead-lettered (unset: not dead)

-- Redis server time in ms: the queue's only clock. `hook` is the optional `now` argument, a
-- test hook; production callers send "" and every timestamp comes from the server.
local function server_now(hook)
  local given = tonumber(hook)
  if given then
    return given
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The deployment's queue policy (written by the workers, see worker/queue/deployment.py), with
-- the Settings defaults when no worker has written it yet (a fresh or emptied Redis).
-- Returns quiet (ms), max wait (ms), max pending.
local function policy_of(key)
  local p = redis.call('HMGET', key, 'quiet', 'max_wait', 'max_pending')
  return tonumber(p[1]) or 30000, tonumber(p[2]) or 300000, tonumber(p[3]) or 10000
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
local function restore_first(log, meta)
  local oldest = first_entry_ms(log)
  if not oldest then
    redis.call('HDEL', meta, 'first')
    return nil
  end
  local first = tonumber(redis.call('HGET', meta, 'first'))
  if not first or oldest < first then
    first = oldest
    redis.call('HSET', meta, 'first', first)
  end
  return first
end

local function scope_of(ns)
  return string.match(ns, '^[^:]+')
end
