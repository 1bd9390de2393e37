-- Helpers shared by the queue scripts; worker/queue/scripts.py prepends this file to each script
-- marked `-- uses _lib.lua` (and _sets.lua, after it, to each marked `-- uses _sets.lua`).
--
-- Meta hash fields of a namespace (<prefix>:{sN}:ns:<ns>:meta):
--   first        ms of the first arrival of the batch not yet claimed (unset: none, or claimed)
--   lms, lseq    the last stream id issued (so `lms` is the latest arrival); ids keep
--                increasing even after trims and drops
--   (fence)      not here: lease tokens come from the shard's counter <prefix>:{sN}:fence,
--                which no script ever deletes, so a token is never issued twice in one epoch
--   token        fence of the current lease (unset: not leased)
--   lease_until  ms when the current lease expires unless extended
--   lease_from   ms when the current lease term began (its claim, or its last heartbeat):
--                with lease_until, what _sets.lua's lease_holds() needs to survive a step
--                of the server's clock
--   covered      id of the last log entry the current lease covers
--   count        how many log entries the current lease covers
--   attempts     failed (or abandoned) attempts of the current batch
--   outages      retries of the current batch after a dependency was unreachable (not counted
--                toward dead-lettering)
--   last_error   why the last attempt failed
--   dead         ms when the namespace was dead-lettered (unset: not dead)
--
-- A namespace whose log empties (its last batch acked, dropped or erased) loses its meta hash
-- and its log key: a waiting namespace costs memory only while it has candidates. Before the
-- meta goes, its last id raises the shard's id floor (stats fields `floor_ms`, `floor_seq`),
-- and a namespace without `lms` issues ids above that floor: ids stay increasing per namespace
-- even when the server's clock steps back, so a SQL ledger position is never overtaken.
--
-- Stats hash fields of a shard (<prefix>:{sN}:stats), kept exact by every script, so reading
-- queue health costs O(shards), never O(namespaces):
--   <scope>          pending candidates of the scope (leased batches included)
--   <scope>:due      the scope's members of the due set (parked leased namespaces included)
--   <scope>:leased   members of the leases set
--   <scope>:dead     members of the dead set
--   <scope>:parked   members of both the due and the leases sets (due again when the lease ends)
--   floor_ms, floor_seq  the id floor (above)
-- Per shard and scope, <prefix>:{sN}:oldest:<scope> is a zset namespace -> ms of its oldest
-- log entry, one member per namespace with candidates, for the oldest pending age.
-- Scripts derive these shard keys from a shard key they were given (same hash tag, so the
-- same Cluster slot): see _sets.lua's shard_key. The helpers that derive those keys and move
-- namespaces between the sets, keeping the counters, are in _sets.lua: the hot path (enqueue)
-- does without them, since every function a script is prepended with is created again on
-- each call.

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

-- The deployment's queue policy: the shard's policy hash, which the workers write. A field the
-- hash lacks (no worker wrote it yet: a fresh or emptied Redis) comes from `given`, the copy
-- the caller sent: its values in field order as big-endian doubles (one argument, read only
-- then). No defaults live here. The fields are worker/types.py's, in its order
-- (checked when the scripts are loaded); the reply is HMGET's own table, made numbers in
-- place (a table more per call, or more arguments, would cost the hot path), indexed by
-- these names. policy_fields() lists the same fields,
-- for claim's restore (a function, so no other script builds the table).
local QUIET, MAX_WAIT, MAX_PENDING, SHARDS = 1, 2, 3, 4
local function policy_fields()
  return {'quiet', 'max_wait', 'max_pending', 'shards'}
end
local function policy_of(key, given)
  local policy = redis.call('HMGET', key, 'quiet', 'max_wait', 'max_pending', 'shards')
  for i = 1, #policy do
    policy[i] = tonumber(policy[i]) or (struct.unpack('>d', given, 8 * i - 7))
  end
  return policy
end

-- The debounce, computed here only: a batch whose first pending arrival was at `first` and
-- latest at `last` (ms) is due `quiet` after the latest, but no later than `max_wait` after
-- the first.
local function due_at(policy, first, last)
  return math.min(last + policy[QUIET], first + policy[MAX_WAIT])
end

-- The scope of a namespace key; a user of an org (org:<org>:user:...) is of the user scope.
local function scope_of(ns)
  if string.match(ns, '^org:[^:]+:user:') then
    return 'user'
  end
  return string.match(ns, '^[^:]+')
end
