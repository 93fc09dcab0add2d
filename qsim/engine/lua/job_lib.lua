-- job_lib: helpers shared by the scripts that change a job's state.
-- Not a script of its own: scripts.lua_source pastes it where a script has the
-- line "-- @include job_lib".

-- The job's attempt log (one "start,end,outcome,worker;" entry per attempt, see
-- qsim.engine.job) with `entry` appended, keeping at most QSIM_LOG_MAX bytes of
-- the latest whole entries: a job handed back or stalled over and over cannot
-- grow its hash without limit.
local QSIM_LOG_MAX = 16384
-- Events stream cap for scripts that are not given one (qsim.engine.protocol.EVENTS_MAXLEN).
local QSIM_EVENTS_MAXLEN = 10000
local function qsim_log(log, entry)
  log = (log or '') .. entry
  if #log > QSIM_LOG_MAX then
    local cut = string.find(log, ';', #log - QSIM_LOG_MAX, true)
    if cut and cut < #log then
      log = string.sub(log, cut + 1)
    else
      log = entry
    end
  end
  return log
end

-- The start of an attempt recorded as `started` (the hash's "attempt_started") when the job waited `held_us`
-- in the worker for a free slot (fetched ahead, see qsim.engine.pipeline): the fetch's stamp moved on by
-- that wait, never past `now_s`. When it moved, its HSET field/value pairs are appended to `fields`
-- ("attempt_started", and "started_at" too when this is the first attempt: `first`, the hash's "started_at"
-- the caller read with the rest, equals `started`), for the caller's one HSET of the job. Returns the start.
local function qsim_held_start(fields, started, first, held_us, now_s)
  if not started or held_us <= 0 then return started end
  local t = tonumber(started) + held_us / 1000000
  local moved = now_s
  if t < tonumber(now_s) then moved = string.format('%.6f', t) end
  fields[#fields + 1] = 'attempt_started'
  fields[#fields + 1] = moved
  if first == started then
    fields[#fields + 1] = 'started_at'
    fields[#fields + 1] = moved
  end
  return moved
end

-- A job key that holds another type than a hash (overwritten by hand), found while reading job
-- `id` of the queue with key base `base`: the value is kept aside as "<job key>:corrupt", a dead
-- job hash with the error takes its place, the id leaves the queue's state sets for the DLQ and
-- the queue's corrupt set, and a "dead" event is written. Per job: the script goes on with the
-- rest of its batch. Returns the error text.
local function qsim_corrupt(base, id, now_ms, now_s, maxlen)
  local jk = base .. 'job:' .. id
  local typ = redis.call('TYPE', jk).ok
  local err = 'PayloadError: job hash is corrupt: the job key held a ' .. typ ..
    ', not a hash (moved to ' .. jk .. ':corrupt)'
  redis.call('RENAME', jk, jk .. ':corrupt')
  redis.call('HSET', jk, 'name', '', 'data', '', 'state', 'dead', 'finished_at', now_s, 'attempts_made', 0,
    'max_attempts', 1, 'error', err)
  for _, set in ipairs({'wait', 'delayed', 'active', 'waiting-children'}) do
    redis.call('ZREM', base .. set, id)
  end
  redis.call('ZADD', base .. 'dead', now_ms, id)
  redis.call('SADD', base .. 'corrupt', id)
  redis.call('XADD', base .. 'events', 'MAXLEN', '~', maxlen, '*', 'event', 'dead', 'job', id, 'name', '',
    'error', err)
  return err
end

-- Wait-set scores: priority * 2^32 + a position in [0, 2^32) (fetch reads the level as floor(score / 2^32)).
-- A job added, retried, promoted or released from waiting-children takes the BACK of its level:
-- 2^31 + seq; a job put back by a stalled check or handed back at shutdown takes the FRONT: 2^31 - 1 -
-- seq (seq: the queue's one FIFO counter, so a later put-back goes before an earlier one). Positions
-- repeat after 2^31 jobs of a queue.
local QSIM_LEVEL = 4294967296
local QSIM_HALF = 2147483648

-- The back-of-level score of a job of priority `prio` (a number or its text) at FIFO number `seq`.
local function qsim_back_position(prio, seq)
  return (tonumber(prio) or 0) * QSIM_LEVEL + QSIM_HALF + seq % QSIM_HALF
end

-- The same, taking the next seq from the queue's counter `seqkey`.
local function qsim_back_score(prio, seqkey)
  return qsim_back_position(prio, redis.call('INCR', seqkey))
end

-- Lanes of a keyed rate limit (see fetch.lua and qsim.engine.keys). A queue whose rate limit is keyed by
-- a payload field keeps, beside its wait set (which still holds every waiting id), one lane per value
-- of the key: <base>lane:<value>, a ZSET of that value's waiting ids scored as in the wait set, and an
-- index of the non-empty lanes: <base>lanes (a lane whose window may have room; score = the wait score
-- of its best job) and <base>lanes-shut (a lane whose window is full; score = the us it has room again).
-- fetch builds the lanes from the wait set when the queue's meta has no lanes = 1 (after the key was
-- set); from then on every script that puts a job in the wait set puts it in its lane too.
local QSIM_LANES = {}

-- Whether queue `base` keeps lanes (read once per script call and queue).
local function qsim_has_lanes(base)
  local has = QSIM_LANES[base]
  if has == nil then
    has = redis.call('HGET', base .. 'meta', 'lanes') == '1'
    QSIM_LANES[base] = has
  end
  return has
end

-- Job `id` of key value `value` joins lane <base>lane:<value> at wait score `score`; an open lane whose
-- best job it now is moves up the index (a shut lane stays shut until its window has room).
local function qsim_lane_put(base, id, score, value)
  redis.call('ZADD', base .. 'lane:' .. value, score, id)
  if redis.call('ZSCORE', base .. 'lanes-shut', value) then return end
  local cur = redis.call('ZSCORE', base .. 'lanes', value)
  if not cur or score < tonumber(cur) then
    redis.call('ZADD', base .. 'lanes', score, value)
  end
end

-- ZADD job `id` to the wait set of queue `base` at `score`, and to its lane when the queue keeps lanes
-- (its key value: `value`, else the job hash's "rkey" field, "" when it has none).
local function qsim_wait_add(base, id, score, value)
  redis.call('ZADD', base .. 'wait', score, id)
  if qsim_has_lanes(base) then
    if value == nil then
      value = redis.pcall('HGET', base .. 'job:' .. id, 'rkey')
      if type(value) ~= 'string' then value = '' end
    end
    qsim_lane_put(base, id, score, value)
  end
end

-- ZADD the jobs {id, prio} of `jobs` to the front of their levels in the wait set `waitkey` (and their
-- lanes), in the order given: the first ahead of the others, all ahead of every job already waiting in
-- their level.
local function qsim_push_front(waitkey, seqkey, jobs)
  if #jobs == 0 then return end
  local base = string.sub(waitkey, 1, -5)
  local top = redis.call('INCRBY', seqkey, #jobs)
  for i, job in ipairs(jobs) do
    local pos = QSIM_HALF - 1 - (top - i + 1) % QSIM_HALF
    qsim_wait_add(base, job[1], (tonumber(job[2]) or 0) * QSIM_LEVEL + pos)
  end
end

-- Redis's clock: ms, "seconds.micros" text and µs (each text of TIME's reply is converted once: a conversion
-- costs Redis more than the arithmetic).
local function qsim_now()
  local t = redis.call('TIME')
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  return sec * 1000 + math.floor(usec / 1000), t[1] .. '.' .. string.format('%06d', usec), sec * 1000000 + usec
end

-- A sorted-set write for many members at once (ZADD key score member ..., ZREM key member ...): the
-- arguments gathered over a batch of jobs go in one call per QSIM_BATCH of them, not one call per job.
-- `add(a, b)` appends one or two arguments; `flush()` sends what is left.
local QSIM_BATCH = 2000
local function qsim_batch(cmd, key)
  local args, b = {}, {}
  function b.flush()
    if #args > 0 then
      redis.call(cmd, key, unpack(args))
      args = {}
    end
  end
  function b.add(x, y)
    args[#args + 1] = x
    if y ~= nil then args[#args + 1] = y end
    if #args >= QSIM_BATCH then b.flush() end
  end
  return b
end

-- The HSET field/value pairs of a new job from its spec in ARGV[b ..] (id, name, data, priority, delay_ms,
-- max_attempts, backoff JSON, timeout s), in state `state`, enqueued at `now_s`, with rate-limit key value
-- `rkey` (nil: none). A field at its default (no delay, no backoff, no timeout; no attempt made and no stall
-- yet) is left out: every reader takes a missing one as its default, and a smaller hash is cheaper for each
-- script that reads or writes the job after this one. The priority is always written: scripts of earlier
-- versions (workers not yet upgraded in a rolling deploy) take a hash without one for a deleted job.
local function qsim_new_fields(b, state, now_s, rkey)
  local hs = {'name', ARGV[b + 1], 'data', ARGV[b + 2], 'priority', ARGV[b + 3], 'max_attempts', ARGV[b + 5],
    'enqueued_at', now_s, 'state', state}
  local n = #hs
  local delay = tonumber(ARGV[b + 4])
  -- (as text with 3 decimals: a Lua number would be stored with 17 digits, 0.05 as 0.050000000000000003)
  if delay > 0 then hs[n + 1], hs[n + 2], n = 'delay', string.format('%.3f', delay / 1000), n + 2 end
  if ARGV[b + 6] ~= '' then hs[n + 1], hs[n + 2], n = 'backoff', ARGV[b + 6], n + 2 end
  if tonumber(ARGV[b + 7]) ~= 0 then hs[n + 1], hs[n + 2], n = 'timeout', ARGV[b + 7], n + 2 end
  if rkey then hs[n + 1], hs[n + 2] = 'rkey', rkey end
  return hs
end
