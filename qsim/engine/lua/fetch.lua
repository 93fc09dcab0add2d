--[[ fetch: choose among a worker's queues and lock up to n jobs, in one atomic step.

For queue i = 1..Q (Q = (#KEYS - 1) / 5), KEYS[5*(i-1) + 1 .. 5*i] (queue 1: KEYS[1]..KEYS[5]):
  wait       ZSET waiting ids (score = priority * 2^32 + position in the level; job_lib)
  active     ZSET locked ids (score = lock expiry ms)
  meta       HASH paused, concurrency_limit, rate_max, rate_per_ms, rate_key, aging_ms
  marker     LIST wake-up marker
  ratelimit  ZSET recent starts (score = start time in us, member = lock token);
             with rate_key set, "<ratelimit>:<value>" per value of that payload field
  (and, with rate_key set, the queue's lanes: <base>lane:<value>, <base>lanes,
  <base>lanes-shut, keys of the same hash slot; job_lib)
KEYS[5*Q + 1] wrr  HASH this worker's smooth-WRR state: field i = current weight of
             queue i (read and written only for policy wrr with Q > 1)
ARGV[1] n, the worker's free slots
ARGV[2] lock duration (ms)
ARGV[3] worker id
ARGV[4] token prefix; a job taken by this call gets the lock token "<prefix>:<id>"
ARGV[5] policy when Q > 1: priority | ordered | wrr
ARGV[6] how many of the jobs taken the worker starts at once (its free slots); the others
        wait in the worker for a slot (fetched ahead): each gets held = 1 in its hash, which
        the worker clears once its handler started (a notice with its next completions,
        complete.lua), so a stalled check finds a job that never started (recover_stalled
        puts it back without counting a stall)
ARGV[7 + 2*(i-1)] job key prefix of queue i;  ARGV[8 + 2*(i-1)] its wrr weight (int >= 1)

Each pick takes one job from one queue among those with a startable job
(not paused, under its limits):
  priority  the lowest effective priority across the queues' candidates; ties go
            to the earlier ready time (enqueued_at + delay), then the earlier queue
  ordered   the first listed queue
  wrr       smooth weighted round-robin (nginx): every eligible queue's current
            weight grows by its weight, the largest is picked and loses the total
            of the eligible weights
A queue's candidate is its head (lowest score). With aging_ms set, it is the
job with the lowest effective priority  p - (now_ms - ready_ms) / aging_ms
among the oldest job of each of its 32 best priority levels (ready_ms =
enqueued_at + delay, in ms; ties: the better level).
With rate_key set, the queue serves per-key lanes (job_lib): its candidate is
the best job of the open lane whose best job comes first in the queue's order
(with aging: the lowest effective priority among the best jobs of its 32 first
open lanes), so a key's backlog of any size never delays another key with room.
A lane is shut (moved to lanes-shut) by the start that fills its window, or
when a pick finds its window full, and reopens when its window has room again
(at the start of a fetch). Work per fetch: each job taken costs a few commands
on ZSETs of at most (number of key values) members; besides, a fetch reopens
at most 64 lanes, and a pick shuts at most 64 open lanes found full (after a
change of the limit). The jobs' key values are their "rkey" field, stored by
add (no payload is decoded here). The lanes are built from the wait set by the
first fetch after the key was set (meta lanes = 1 from then on: the other
scripts keep them).
Limits: concurrency_limit caps ZCARD(active) (a dead worker's job counts until
the stalled check removes it); the rate limit is a sliding window: a start is
allowed at now_us when fewer than rate_max starts lie in (now_us - per, now_us].

Returns one JSON string: [status, job, job, ...] with status = [wait_ms, limited, now, i, ...], all strings
(a number costs the encoding more):
wait_ms is -1, or, when queues still have waiting jobs that their rate limit
holds back, the ms until the earliest of them may start; limited is 1 when a
queue of the call has a concurrency or rate limit set, else 0 (the worker then
fetches only for free slots, never ahead, and hands back the jobs it holds);
now is Redis' time of the call ("<s>.<us>", the time the jobs were locked: the
worker ages a held job's lock from it, not from when it read the reply); the i are the
unkeyed ones among those queues (held back whole: the worker need not wake
for their adds; a keyed queue's new job may have a key with room). job = [id, token,
name, data, attempts_made, max_attempts, backoff, timeout, queue index, enqueued], all
strings; enqueued is the hash's enqueued_at on the job's first start, else "" (the worker
takes it from now: the job's wait, qsim.engine.protocol.parse_fetch_status).
Ids whose hash is gone are dropped; a hash missing fields is returned with ""
for them (the worker sends it to the DLQ); a job key of another type than a
hash goes to the DLQ and the corrupt set here (job_lib).
Markers: a queue with jobs left and room pushes its marker (other workers take
the rest); a queue at its concurrency limit has its marker deleted (complete
and fail push it when a slot frees).
]]
-- @include job_lib
local now_ms, now_s, now_us = qsim_now()
local n = tonumber(ARGV[1])
local expiry = now_ms + tonumber(ARGV[2])
local worker = ARGV[3]
local tokp = ARGV[4]
local policy = ARGV[5]
local at_once = tonumber(ARGV[6])
local Q = (#KEYS - 1) / 5
local SHIFT = 4294967296
local LEVELS, LANES_MAX = 32, 64

local qs = {}
local limited = '0'
for i = 1, Q do
  local b = 5 * (i - 1)
  local q = {wait = KEYS[b + 1], active = KEYS[b + 2], meta = KEYS[b + 3], marker = KEYS[b + 4], rl = KEYS[b + 5],
    prefix = ARGV[7 + 2 * (i - 1)], weight = tonumber(ARGV[8 + 2 * (i - 1)]), room = n,
    index = string.format('%d', i)}
  local m = redis.call('HMGET', q.meta, 'paused', 'concurrency_limit', 'rate_max', 'rate_per_ms', 'rate_key', 'aging_ms')
  q.off = m[1] == '1'
  if m[2] or m[3] then limited = '1' end
  if m[2] then
    q.climit = tonumber(m[2])
    local r = q.climit - redis.call('ZCARD', q.active)
    if r < q.room then q.room = r end
  end
  if m[3] then
    q.rmax = tonumber(m[3])
    q.rper = tonumber(m[4]) * 1000
    if m[5] and m[5] ~= '' then
      q.rkey = m[5]
      q.keys = {}
      q.base = string.sub(q.prefix, 1, -5)
      q.open, q.shut = q.base .. 'lanes', q.base .. 'lanes-shut'
    else
      redis.call('ZREMRANGEBYSCORE', q.rl, '-inf', now_us - q.rper)
      local r = q.rmax - redis.call('ZCARD', q.rl)
      if r < q.room then q.room = r end
    end
  end
  if m[6] and tonumber(m[6]) > 0 then q.aging = tonumber(m[6]) end
  qs[i] = q
end

-- The lanes of keyed queue q, built from its wait set (the first fetch after the key was set).
local function build_lanes(q)
  for _, set in ipairs({q.open, q.shut}) do
    for _, v in ipairs(redis.call('ZRANGE', set, 0, -1)) do redis.call('DEL', q.base .. 'lane:' .. v) end
    redis.call('DEL', set)
  end
  local ws = redis.call('ZRANGE', q.wait, 0, -1, 'WITHSCORES')
  local best = {}
  for j = 1, #ws, 2 do
    local v = redis.pcall('HGET', q.prefix .. ws[j], 'rkey')
    if type(v) ~= 'string' then v = '' end
    redis.call('ZADD', q.base .. 'lane:' .. v, ws[j + 1], ws[j])
    if not best[v] then best[v] = ws[j + 1] end  -- the wait set comes best first
  end
  for v, sc in pairs(best) do redis.call('ZADD', q.open, sc, v) end
  redis.call('HSET', q.meta, 'lanes', '1')
  QSIM_LANES[q.base] = true
end

for i = 1, Q do
  local q = qs[i]
  if q.rkey and not q.off and q.room > 0 then
    if not qsim_has_lanes(q.base) then build_lanes(q) end
    -- reopen the lanes whose window has room again
    local due = redis.call('ZRANGEBYSCORE', q.shut, '-inf', now_us, 'LIMIT', 0, LANES_MAX)
    for _, v in ipairs(due) do
      redis.call('ZREM', q.shut, v)
      local h = redis.call('ZRANGE', q.base .. 'lane:' .. v, 0, 0, 'WITHSCORES')
      if h[1] then redis.call('ZADD', q.open, h[2], v) end
    end
  end
end

-- us until one more start is allowed in the window ZSET zk (which holds >= rate_max starts)
local function window_wait(q, zk)
  local c = redis.call('ZCARD', zk)
  local o = redis.call('ZRANGE', zk, c - q.rmax, c - q.rmax, 'WITHSCORES')
  return tonumber(o[2]) + q.rper - now_us
end

local function ready_ms(q, id)
  local f = redis.pcall('HMGET', q.prefix .. id, 'enqueued_at', 'delay')
  if f.err then return 0 end  -- not a hash: start() sends it to the DLQ
  return ((tonumber(f[1]) or 0) + (tonumber(f[2]) or 0)) * 1000
end

-- the lane and rate window of key value v (a job's "rkey" field, stored as text by add from the payload)
local function key_state(q, v)
  local s = q.keys[v]
  if not s then
    local zk = q.rl .. ':' .. v
    redis.call('ZREMRANGEBYSCORE', zk, '-inf', now_us - q.rper)
    s = {v = v, zk = zk, lane = q.base .. 'lane:' .. v, room = q.rmax - redis.call('ZCARD', zk)}
    q.keys[v] = s
  end
  return s
end

-- lane s's window is full: out of the open index, into lanes-shut until the window has room (an empty
-- lane leaves the index: its next job opens it again)
local function shut(q, s)
  redis.call('ZREM', q.open, s.v)
  if redis.call('EXISTS', s.lane) == 1 then
    redis.call('ZADD', q.shut, now_us + window_wait(q, s.zk), s.v)
  end
end

-- after a pick from lane s: shut it if its window is now full, else index it by its new best job
local function lane_after(q, s)
  if s.room <= 0 then
    shut(q, s)
    return
  end
  local h = redis.call('ZRANGE', s.lane, 0, 0, 'WITHSCORES')
  if h[1] then
    redis.call('ZADD', q.open, h[2], s.v)
  else
    redis.call('ZREM', q.open, s.v)
  end
end

-- the best job of an open lane {id, eff, t, s} whose window has room: the first open lane (with
-- aging, the lowest effective priority among the first LEVELS); lanes found empty leave the index,
-- lanes found full are shut (at most LANES_MAX per pick)
local function lane_candidate(q)
  local best, skipped = false, 0
  while not best and skipped < LANES_MAX do
    local tops = redis.call('ZRANGE', q.open, 0, (q.aging and LEVELS or 1) - 1)
    if not tops[1] then return false end
    for _, v in ipairs(tops) do
      local s = key_state(q, v)
      local h = redis.call('ZRANGE', s.lane, 0, 0, 'WITHSCORES')
      if not h[1] then
        redis.call('ZREM', q.open, v)
        skipped = skipped + 1
      elseif s.room <= 0 then
        shut(q, s)
        skipped = skipped + 1
      else
        local eff, rt = math.floor(tonumber(h[2]) / SHIFT), nil
        if q.aging then
          rt = ready_ms(q, h[1])
          eff = eff - (now_ms - rt) / q.aging
        end
        if not best or eff < best.eff then best = {id = h[1], eff = eff, t = rt, s = s} end
        if not q.aging then break end
      end
    end
  end
  return best
end

-- the queue's next startable job {id, eff, t, s}, or false
local function candidate(q)
  if q.off or q.room <= 0 then return false end
  if q.rkey then
    return lane_candidate(q)
  elseif q.aging then
    local best, lo = false, 0
    for _ = 1, LEVELS do
      local h = redis.call('ZRANGEBYSCORE', q.wait, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      if not h[1] then break end
      local p = math.floor(tonumber(h[2]) / SHIFT)
      local rt = ready_ms(q, h[1])
      local eff = p - (now_ms - rt) / q.aging
      if not best or eff < best.eff then best = {id = h[1], eff = eff, t = rt} end
      lo = (p + 1) * SHIFT
    end
    return best
  end
  local h = redis.call('ZRANGE', q.wait, 0, 0, 'WITHSCORES')
  if not h[1] then return false end
  return {id = h[1], eff = math.floor(tonumber(h[2]) / SHIFT)}
end

local out = {{'-1', limited, now_s}}
local k = 0
local expiry_text = string.format('%d', expiry)
local locked = {}  -- per queue of the call: its active set's ZADD, sent once at the end (qsim_batch)
local touched = {}  -- rate-limit ZSETs written: their expiry is renewed once at the end
local function start(q, i, id, s)
  local jk = q.prefix .. id
  local f = redis.pcall('HMGET', jk, 'name', 'data', 'attempts_made', 'max_attempts', 'backoff', 'timeout', 'started_at',
    'enqueued_at')
  if f.err then
    -- The job key holds another type (written by hand). An error here would abort the script after its id
    -- left the wait set and lose the rest of the batch: keep the value aside and dead-letter the job instead.
    qsim_corrupt(string.sub(q.prefix, 1, -5), id, now_ms, now_s, QSIM_EVENTS_MAXLEN)
    return
  end
  if not (f[1] or redis.call('EXISTS', jk) == 1) then return end
  local enqueued = ''  -- on a first start: the worker takes it from now (the subtraction costs Redis nothing)
  if not f[7] and f[8] then enqueued = f[8] end
  k = k + 1
  local tok = tokp .. ':' .. id
  local hs  -- (built whole: a table grown past its constructor's size is rebuilt)
  if f[7] then
    hs = {'state', 'active', 'attempt_started', now_s, 'worker', worker, 'token', tok}
  else
    hs = {'state', 'active', 'attempt_started', now_s, 'worker', worker, 'token', tok, 'started_at', now_s}
  end
  if k > at_once then
    hs[#hs + 1] = 'held'
    hs[#hs + 1] = '1'
  end
  redis.call('HSET', jk, unpack(hs))
  if not locked[i] then locked[i] = qsim_batch('ZADD', q.active) end
  locked[i].add(expiry_text, id)
  q.room = q.room - 1
  q.took = true
  if q.rmax then
    local zk = q.rl
    if s then
      zk = s.zk
      s.room = s.room - 1
    end
    redis.call('ZADD', zk, now_us, tok)
    touched[zk] = math.ceil(q.rper / 1000) + 1000
  end
  out[k + 1] = {id, tok, f[1] or '', f[2] or '', f[3] or '0', f[4] or '1', f[5] or '', f[6] or '0', q.index, enqueued}
end

local wrr = policy == 'wrr' and Q > 1
local cur = {}
if wrr then
  local fields = {}
  for i = 1, Q do fields[i] = tostring(i) end
  local c = redis.call('HMGET', KEYS[5 * Q + 1], unpack(fields))
  for i = 1, Q do cur[i] = tonumber(c[i] or '0') end
end
local single = Q == 1 or policy == 'ordered'
local q1 = qs[1]
local plain1 = Q == 1 and not q1.rkey and not q1.aging

-- The first m ids of wait set q.wait, taken out of it. (Not ZPOPMIN: its reply formats every score as text,
-- which costs Redis more than the second command does. The ranks go as text: Redis formats a Lua number
-- argument as a double, at many times the cost.)
local function take(q, m)
  local ids = redis.call('ZRANGE', q.wait, '0', string.format('%d', m - 1))
  if ids[1] then redis.call('ZREMRANGEBYRANK', q.wait, '0', string.format('%d', #ids - 1)) end
  return ids
end

if plain1 and not q1.off and q1.room > 0 then  -- the common case: one queue, no choice to make
  for _, id in ipairs(take(q1, q1.room)) do start(q1, 1, id) end
end
while k < n and not plain1 do
  local elig = {}
  for i = 1, Q do
    local q = qs[i]
    if q.c == nil then q.c = candidate(q) end
    if q.c then elig[#elig + 1] = i end
  end
  if #elig == 0 then break end
  local pick = elig[1]
  if wrr then
    local total = 0
    pick = nil
    for _, i in ipairs(elig) do
      cur[i] = cur[i] + qs[i].weight
      total = total + qs[i].weight
      if not pick or cur[i] > cur[pick] then pick = i end
    end
    cur[pick] = cur[pick] - total
  elseif not single then
    for _, i in ipairs(elig) do
      local c, b = qs[i].c, qs[pick].c
      if c.eff < b.eff then
        pick = i
      elseif c.eff == b.eff and i ~= pick then
        if not c.t then c.t = ready_ms(qs[i], c.id) end
        if not b.t then b.t = ready_ms(qs[pick], b.id) end
        if c.t < b.t then pick = i end
      end
    end
  end
  local q = qs[pick]
  if single and not q.rkey and not q.aging then
    local m = n - k
    if q.room < m then m = q.room end
    for _, id in ipairs(take(q, m)) do start(q, pick, id) end
  elseif q.rkey then
    local c = q.c
    redis.call('ZREM', c.s.lane, c.id)
    if redis.call('ZREM', q.wait, c.id) == 1 then  -- (else a stale lane entry: the job left the wait set)
      start(q, pick, c.id, c.s)
    end
    lane_after(q, c.s)
  else
    redis.call('ZREM', q.wait, q.c.id)
    start(q, pick, q.c.id, q.c.s)
  end
  q.c = nil
end

for _, b in pairs(locked) do b.flush() end
for zk, ms in pairs(touched) do redis.call('PEXPIRE', zk, ms) end
if wrr then
  local hs = {}
  for i = 1, Q do
    hs[#hs + 1] = tostring(i)
    hs[#hs + 1] = cur[i]
  end
  redis.call('HSET', KEYS[5 * Q + 1], unpack(hs))
  redis.call('PEXPIRE', KEYS[5 * Q + 1], 3600000)
end

local wait = nil
for i = 1, Q do
  local q = qs[i]
  if not q.off and redis.call('ZCARD', q.wait) > 0 then
    local rw = nil
    if q.rmax and not q.rkey and redis.call('ZCARD', q.rl) >= q.rmax then
      rw = window_wait(q, q.rl)
    elseif q.rkey and redis.call('ZCARD', q.open) == 0 then
      -- every lane with jobs is shut: the first reopens then (a new key's job opens a lane and wakes a worker)
      local e = redis.call('ZRANGE', q.shut, 0, 0, 'WITHSCORES')
      if e[1] then rw = tonumber(e[2]) - now_us end
    end
    if q.climit and redis.call('ZCARD', q.active) >= q.climit then
      redis.call('DEL', q.marker)
    elseif rw then
      -- an unkeyed queue is held back whole: the worker need not wake for its adds until then; a keyed
      -- one only for the keys at their limit: a job of another key, added meanwhile, may start at once
      if not q.rkey then out[1][#out[1] + 1] = q.index end
      if not wait or rw < wait then wait = rw end
    elseif q.took and redis.call('LLEN', q.marker) == 0 then
      redis.call('RPUSH', q.marker, '1')
    end
  end
end
if wait then
  if wait < 1000 then wait = 1000 end
  out[1][1] = string.format('%d', math.ceil(wait / 1000))
end
return cjson.encode(out)
