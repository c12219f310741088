#!lua name=crawlstore

-- crawlstore's functions on a Redis (or Valkey) server. Each touches keys of one hash slot.
-- The store's slot holds its lock, its epoch (the token of the last unit that committed: a
-- value never used twice, so that a cache is never taken for true after a failover lost the
-- commit it knew) and the journal of a commit under way;
-- ``cs_apply`` writes one slot's share of a commit. Writes are whole values (no increments),
-- so applying a journal twice gives what applying it once gives.
--
-- Fencing: taking the lock also draws a fence, a number that only grows (``INCR`` in the
-- store's slot). Every slot's writes carry their unit's fence, and each hash tag written keeps
-- the newest fence applied to it (``<tag>:f``): a write older than that is refused. So a unit
-- paused past its lock's ttl, whose journal the next holder applied, cannot write its stale
-- values over what later units wrote, however long it was paused.

local VERSION = '@VERSION@'  -- major.minor.digest, filled in by server.py

local function version()
  return VERSION
end

-- KEYS: lock, epoch, journal, fence counter. ARGV: token, ttl (ms).
-- {1, epoch, fence, journal or false} when taken; {0, ms the holder has left} when held.
local function acquire(keys, args)
  if redis.call('SET', keys[1], args[1], 'NX', 'PX', args[2]) then
    local epoch = redis.call('GET', keys[2]) or '0'
    local fence = redis.call('INCR', keys[4])
    local journal = redis.call('GET', keys[3])
    return {1, epoch, fence, journal}
  end
  return {0, redis.call('PTTL', keys[1])}
end

local function held(lock, token)
  if redis.call('GET', lock) ~= token then
    return redis.error_reply('CSLOCK the store lock was lost (held longer than its ttl)')
  end
  return nil
end

-- The writes in ARGV from ``first`` on, each: opcode, index of its key in KEYS, operands.
local function apply_ops(keys, args, first)
  local i = first
  local n = #args
  while i <= n do
    local op, key = args[i], keys[tonumber(args[i + 1])]
    if op == 'H' then
      redis.call('HSET', key, args[i + 2], args[i + 3]); i = i + 4
    elseif op == 'h' then
      redis.call('HDEL', key, args[i + 2]); i = i + 3
    elseif op == 'Z' then
      redis.call('ZADD', key, 0, args[i + 2]); i = i + 3
    elseif op == 'z' then
      redis.call('ZREM', key, args[i + 2]); i = i + 3
    elseif op == 'T' then  -- keep the greatest members of a sorted set, this many
      redis.call('ZREMRANGEBYRANK', key, 0, -(tonumber(args[i + 2]) + 1)); i = i + 3
    elseif op == 'S' then
      redis.call('SADD', key, args[i + 2]); i = i + 3
    elseif op == 's' then
      redis.call('SREM', key, args[i + 2]); i = i + 3
    elseif op == 'D' then
      redis.call('DEL', key); i = i + 2
    elseif op == 'L' then  -- a string of this many zero bytes, made at once when it is new
      if redis.call('EXISTS', key) == 0 then
        redis.call('SETRANGE', key, tonumber(args[i + 2]) - 1, '\0')
      end
      i = i + 3
    elseif op == 'B' then
      local count = tonumber(args[i + 2])
      local call = {'BITFIELD', key}
      for j = 1, count do
        call[#call + 1] = 'SET'; call[#call + 1] = 'u1'
        call[#call + 1] = args[i + 2 + j]; call[#call + 1] = 1
      end
      redis.call(unpack(call)); i = i + 3 + count
    else
      return redis.error_reply('CSOP unknown write ' .. tostring(op))
    end
  end
  return nil
end

-- KEYS: the slot's data keys, then the fence keys of their hash tags. ARGV: the unit's
-- fence, how many fence keys, writes (naming data keys by their index in KEYS).
local function apply(keys, args)
  local fence = tonumber(args[1])
  local first = #keys - tonumber(args[2]) + 1
  for i = first, #keys do
    local newest = tonumber(redis.call('GET', keys[i]) or '0')
    if newest > fence then
      return redis.error_reply('CSFENCE a later unit has written here (fence ' .. newest ..
        ' > ' .. fence .. '): this unit held the store lock past its ttl')
    end
  end
  local err = apply_ops(keys, args, 3)
  if err then return err end
  for i = first, #keys do
    redis.call('SET', keys[i], args[1])
  end
  return 1
end

-- One node holds every key (a standalone Redis): the whole commit at once.
-- KEYS: lock, epoch, journal, data keys. ARGV: token, writes. The new epoch (the token).
local function commit(keys, args)
  local err = held(keys[1], args[1])
  if err then return err end
  err = apply_ops(keys, args, 2)
  if err then return err end
  redis.call('SET', keys[2], args[1])
  redis.call('DEL', keys[1])
  return args[1]
end

-- KEYS: lock, journal. ARGV: token, the journal (every slot's writes), ttl (ms): the lock
-- lasts that long again, for the writes that follow.
local function journal(keys, args)
  local err = held(keys[1], args[1])
  if err then return err end
  redis.call('SET', keys[2], args[2])
  redis.call('PEXPIRE', keys[1], args[3])
  return 1
end

-- KEYS: lock. ARGV: token, ttl (ms). A long unit keeps its lock.
local function extend(keys, args)
  local err = held(keys[1], args[1])
  if err then return err end
  redis.call('PEXPIRE', keys[1], args[2])
  return 1
end

-- KEYS: lock, epoch, journal. ARGV: token, changed (1: a commit ended), keep (1: hold on).
local function release(keys, args)
  local err = held(keys[1], args[1])
  if err then return err end
  local epoch = redis.call('GET', keys[2]) or '0'
  if args[2] == '1' then
    redis.call('DEL', keys[3])
    redis.call('SET', keys[2], args[1])
    epoch = args[1]
  end
  if args[3] ~= '1' then
    redis.call('DEL', keys[1])
  end
  return epoch
end

-- A bucket's optimistic commit (``bucket.py``): a bucket (one hash tag, one slot) keeps a
-- version, a value never used twice, set by each commit; a unit reads under a version and
-- commits only if the bucket is still at it. KEYS: the version key, then data keys of its
-- hash tag. ARGV: the version read ('' when the key did not exist; '*' for a unit that read
-- nothing, whose writes hold whatever the version), the new version, then the writes (as
-- ``apply_ops`` takes them, naming data keys by their index in KEYS).
-- {1} when written; {0, the version found ('' when absent)} when it moved: nothing written.
local function commit_v(keys, args)
  local found = redis.call('GET', keys[1]) or ''
  if args[1] ~= '*' and found ~= args[1] then
    return {0, found}
  end
  local err = apply_ops(keys, args, 3)
  if err then return err end
  redis.call('SET', keys[1], args[2])
  return {1}
end

-- One server holds every key (a standalone Redis): several units, each with its version key,
-- committed at once or not at all. KEYS: the n version keys, then the data keys. ARGV: n, the
-- n versions the units read under ('*': any), the n new ones ('': the version stays: a unit
-- that wrote nothing, checked only), then the writes (keys indexed from n + 1).
-- {1} when written; {0, i, found} when the i-th version moved (nothing written).
local function commit_all(keys, args)
  local n = tonumber(args[1])
  for i = 1, n do
    local found = redis.call('GET', keys[i]) or ''
    if args[1 + i] ~= '*' and found ~= args[1 + i] then
      return {0, i, found}
    end
  end
  local err = apply_ops(keys, args, 2 + 2 * n)
  if err then return err end
  for i = 1, n do
    if args[1 + n + i] ~= '' then
      redis.call('SET', keys[i], args[1 + n + i])
    end
  end
  return {1}
end

redis.register_function{function_name='cs_version', callback=version, flags={'no-writes'}}
-- Taking, extending and releasing the lock work on a full node, so that reads and releases do.
redis.register_function{function_name='cs_acquire', callback=acquire, flags={'allow-oom'}}
redis.register_function('cs_apply', apply)
redis.register_function('cs_commit', commit)
redis.register_function('cs_journal', journal)
redis.register_function('cs_commit_v', commit_v)
redis.register_function('cs_commit_all', commit_all)
redis.register_function{function_name='cs_extend', callback=extend, flags={'allow-oom'}}
redis.register_function{function_name='cs_release', callback=release, flags={'allow-oom'}}
