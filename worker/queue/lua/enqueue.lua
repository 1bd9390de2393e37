-- enqueue: append one candidate to its namespace's log and arm the namespace's due time.
--
-- uses _lib.lua (prepended when loaded)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  stats   <prefix>:{sN}:stats
-- KEYS[5]  policy  <prefix>:{sN}:policy  the deployment's queue policy (see _lib.lua's policy_of)
-- ARGV[1]   now           (ms), or "" for the server's TIME (production clients always send "")
-- ARGV[2]   namespace     its key; its scope (the part before the first ":") is the stats field
-- ARGV[3]   id            the candidate's id
-- ARGV[4]   candidate     the candidate's JSON
-- ARGV[5]   shards        the client's shard count (MEMWORKER_QUEUE_SHARDS), checked with the
--                         workers'
-- ARGV[6]   policy        the release's default policy, packed: used only for what no worker
--                         has written into the hash (worker/types.py)
-- Derived (same hash tag): <prefix>:{sN}:oldest:<scope>, written on a namespace's first arrival.
--
-- Returns the entry's stream id, or the error "BACKLOG_FULL <pending> <limit>", or
-- "SHARDS_MISMATCH <client's> <workers'>" (the candidate would sit where no sweep looks).
-- The due time is _lib.lua's due_at (the debounce) and only ever moves later (ZADD GT).
-- The clock and the policy are the server's: nothing the client sends changes when a
-- namespace becomes due. A leased namespace is not armed (the lease's end re-arms it) and
-- neither is a dead-lettered one (candidates still accumulate, visible, until an operator
-- retries or drops them).

local now = server_now(ARGV[1])
local policy = policy_of(KEYS[5], ARGV[6])
local shards, max_pending = policy[SHARDS], policy[MAX_PENDING]
if shards and shards ~= tonumber(ARGV[5]) then
  return redis.error_reply('SHARDS_MISMATCH ' .. tostring(ARGV[5]) .. ' ' .. shards)
end
local pending = redis.call('XLEN', KEYS[1])
if pending >= max_pending then
  return redis.error_reply('BACKLOG_FULL ' .. pending .. ' ' .. max_pending)
end

local m = redis.call('HMGET', KEYS[2], 'first', 'lms', 'lseq', 'token', 'dead')

-- Explicit ids: `XADD <ms>-*` needs Redis 7. Never below the last id issued (the server's
-- clock may step back), so XADD cannot fail; `lms` is thereby also the latest arrival.
-- A namespace without `lms` (new, or emptied and forgotten) starts above the shard's id floor.
local lms, lseq = tonumber(m[2]), tonumber(m[3])
if not lms then
  local f = redis.call('HMGET', KEYS[4], 'floor_ms', 'floor_seq')
  lms, lseq = tonumber(f[1]), tonumber(f[2])
end
local ms, seq = now, 0
if lms and lms >= now then
  ms = lms
  seq = lseq + 1
end
local id = string.format('%d-%d', ms, seq)
redis.call('XADD', KEYS[1], id, 'c', ARGV[4], 'i', ARGV[3])

local first = tonumber(m[1]) or now
local scope = scope_of(ARGV[2])
redis.call('HSET', KEYS[2], 'first', first, 'lms', ms, 'lseq', seq)
redis.call('HINCRBY', KEYS[4], scope, 1)
-- First arrival only (the log was empty, the namespace not in the due set): what _sets.lua's
-- oldest_key and due_add do, inline, so the hot path is not prepended with the set helpers.
if pending == 0 then
  -- This entry is the log's oldest: <prefix>:{sN}:oldest:<scope>, derived from the stats key.
  redis.call('ZADD', string.sub(KEYS[4], 1, -6) .. 'oldest:' .. scope, ms, ARGV[2])
end

if not m[4] and not m[5] then
  -- GT: the due time only moves later. A new member is counted (<scope>:due).
  if redis.call('ZADD', KEYS[3], 'GT', due_at(policy, first, now), ARGV[2]) == 1 then
    redis.call('HINCRBY', KEYS[4], scope .. ':due', 1)
  end
end
return id
