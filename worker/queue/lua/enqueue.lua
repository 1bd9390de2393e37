-- enqueue: append one candidate to its namespace's log and arm the namespace's due time.
--
-- uses _lib.lua (prepended when loaded)
--
-- KEYS[1]  log     <prefix>:{sN}:ns:<ns>:log
-- KEYS[2]  meta    <prefix>:{sN}:ns:<ns>:meta
-- KEYS[3]  due     <prefix>:{sN}:due
-- KEYS[4]  stats   <prefix>:{sN}:stats
-- KEYS[5]  policy  <prefix>:{sN}:policy (quiet, max_wait, max_pending: the deployment's)
-- ARGV[1]  now (ms), or "" for the server's TIME (production clients always send "")
-- ARGV[2]  namespace key; its scope (the part before the first ":") is the stats field
-- ARGV[3]  candidate id
-- ARGV[4]  candidate JSON
--
-- Returns the entry's stream id, or the error "BACKLOG_FULL <pending> <limit>".
-- The due time is min(now + quiet, first + max_wait) and only ever moves later (ZADD GT).
-- The clock and the policy are the server's: nothing the client sends changes when a
-- namespace becomes due. A leased namespace is not armed (the lease's end re-arms it) and
-- neither is a dead-lettered one (candidates still accumulate, visible, until an operator
-- retries or drops them).

local now = server_now(ARGV[1])
local quiet, max_wait, max_pending = policy_of(KEYS[5])
local pending = redis.call('XLEN', KEYS[1])
if pending >= max_pending then
  return redis.error_reply('BACKLOG_FULL ' .. pending .. ' ' .. max_pending)
end

local m = redis.call('HMGET', KEYS[2], 'first', 'lms', 'lseq', 'token', 'dead')

-- Explicit ids: `XADD <ms>-*` needs Redis 7. Never below the last id issued (the server's
-- clock may step back), so XADD cannot fail; `lms` is thereby also the latest arrival.
local ms, seq = now, 0
local lms = tonumber(m[2])
if lms and lms >= now then
  ms = lms
  seq = tonumber(m[3]) + 1
end
local id = string.format('%d-%d', ms, seq)
redis.call('XADD', KEYS[1], id, 'c', ARGV[4], 'i', ARGV[3])

local first = tonumber(m[1]) or now
redis.call('HSET', KEYS[2], 'first', first, 'lms', ms, 'lseq', seq)
redis.call('HINCRBY', KEYS[4], string.match(ARGV[2], '^[^:]+'), 1)

if not m[4] and not m[5] then
  local due = math.min(now + quiet, first + max_wait)
  redis.call('ZADD', KEYS[3], 'GT', due, ARGV[2])
end
return id
