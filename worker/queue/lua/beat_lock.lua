-- beat_lock: hold the deployment's single-beat lock: renew it when we hold it, take it when
-- it is free (or expired), otherwise leave it to its holder; take it over from a holder the
-- caller has seen dead.
--
-- KEYS[1]  lock    <prefix>:beat:lock
-- ARGV[1]   token         this beat's identity (host:pid:random:pid-namespace)
-- ARGV[2]   ttl           lock lifetime (ms): a holder that stops renewing loses it after this long
-- ARGV[3]   mode          "hold" (acquire or renew), "release" (delete it if we hold it) or
--                         "takeover" (replace the holder ARGV[4], and only that one)
-- ARGV[4]   dead          with "takeover": the token of the holder found dead
--
-- Returns {1} when this beat holds the lock afterwards (hold, takeover) or released it
-- (release); else {0, holder} with the token of the beat that holds it (false: none).

local holder = redis.call('GET', KEYS[1])
if ARGV[3] == 'release' then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return {1}
  end
  return {0, holder}
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
if holder and not (ARGV[3] == 'takeover' and holder == ARGV[4]) then
  return {0, holder}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1}
