--[[ complete: mark a batch of active jobs completed, then trim old completed jobs.

KEYS[1] active     ZSET locked ids
KEYS[2] completed  ZSET completed ids (score = finish ms)
KEYS[3] events     STREAM event stream
KEYS[4] meta       HASH queue settings (keep_count, keep_age_ms, concurrency_limit)
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] default keep_count (-1 = keep all) when meta has none
ARGV[4] default keep_age_ms (-1 = no age limit) when meta has none
ARGV[5] S, the number of start notices that follow
ARGV[6 .. 5 + 2*S] per notice: id, lock token of a job fetched ahead (marked held by fetch) whose
        handler has started since: its "held" mark is cleared (a stalled check then counts a stall
        for it; recover_stalled); a notice whose token no longer matches, or whose job is no longer
        active, changes nothing
ARGV[6 + 2*S + 4*i ..] per job: id, lock token, return value (JSON), µs the job waited in the worker
        for a free slot before its handler ran (0 unless fetched ahead: its attempt's start, and its
        first start, move on by that much)

Returns one code per job:
   1 completed
   0 already completed with this token (a retried call): nothing done
  -1 lock lost: the token does not match or the job is not active; refused
  -2 no such job
  -3 the job key holds another type than a hash: moved to the DLQ and the
     corrupt set (job_lib); the rest of the batch goes on
A return value of null is not stored (readers take a missing returnvalue as null).
A completed child of a flow is recorded on its parent (flow_lib).
With a concurrency_limit and jobs waiting, the queue's marker (<base>marker) is pushed.

Completions go on when Redis is at its maxmemory under noeviction (extend_lock.lua says why that holds):
PERSIST on the active set, a write that cannot grow memory, goes first.
]]
-- @include job_lib
-- @include flow_lib
redis.call('PERSIST', KEYS[1])
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local base = string.sub(prefix, 1, -5)
local maxlen = ARGV[2]
local codes = {}
local done = 0
local now_ms_text = string.format('%d', now_ms)
local leave_active, enter_completed = qsim_batch('ZREM', KEYS[1]), qsim_batch('ZADD', KEYS[2])
-- what the completion reads of a job; the start stamps only for a job fetched ahead, whose start moves on (a field
-- looked up costs Redis a scan of the hash, a call of its own costs more)
local FIELDS = {'token', 'state', 'attempts_made', 'name', 'parent', 'held'}
local FIELDS_HELD = {'token', 'state', 'attempts_made', 'name', 'parent', 'held', 'attempt_started', 'started_at'}
local notices = tonumber(ARGV[5])
for i = 6 + 2 * notices, #ARGV, 4 do
  local id = ARGV[i]
  local jk = prefix .. id
  local held_us = tonumber(ARGV[i + 3]) or 0
  local f = redis.pcall('HMGET', jk, unpack(held_us > 0 and FIELDS_HELD or FIELDS))
  if f.err then
    qsim_corrupt(base, id, now_ms, now_s, maxlen)
    codes[#codes + 1] = -3
  elseif not f[2] then
    codes[#codes + 1] = -2
  elseif f[1] ~= ARGV[i + 1] then
    codes[#codes + 1] = -1
  elseif f[2] == 'completed' then
    codes[#codes + 1] = 0
  elseif f[2] ~= 'active' then
    codes[#codes + 1] = -1
  else
    leave_active.add(id)
    if f[6] then redis.call('HDEL', jk, 'held') end  -- (its start notice was still on its way)
    local made = '1'  -- (text: a Lua number would be formatted for Redis, which costs more than the job's lookups)
    if f[3] then made = tostring((tonumber(f[3]) or 0) + 1) end
    -- a null result (a handler that returns nothing) is not stored: readers take a missing one as null, and a
    -- field the hash gains costs Redis a scan of it and a reallocation (about 2 % of a job's cost)
    local hs
    if ARGV[i + 2] == 'null' then
      hs = {'state', 'completed', 'finished_at', now_s, 'attempts_made', made}
    else
      hs = {'state', 'completed', 'finished_at', now_s, 'attempts_made', made, 'returnvalue', ARGV[i + 2]}
    end
    qsim_held_start(hs, f[7], f[8], held_us, now_s)
    -- (no "log" entry: a completed attempt is attempt_started, finished_at and worker; readers add it)
    redis.call('HSET', jk, unpack(hs))
    enter_completed.add(now_ms_text, id)
    redis.call('XADD', KEYS[3], '*', 'event', 'completed', 'job', id, 'name', f[4] or '')
    codes[#codes + 1] = 1
    done = done + 1
    if f[5] then
      qsim_child_finished(base, id, f[5], redis.call('HGET', jk, 'parent_base'), nil, ARGV[i + 2], nil, now_ms, now_s,
        maxlen)
    end
  end
end
leave_active.flush()
enter_completed.flush()
-- the events stream is trimmed once per call, not on every XADD (whose MAXLEN check is paid per event: about
-- 3 % of a completion's Redis instructions); the script is atomic, so no reader sees the stream in between
if done > 0 then redis.call('XTRIM', KEYS[3], 'MAXLEN', '~', maxlen) end
for i = 6, 5 + 2 * notices, 2 do
  local jk = prefix .. ARGV[i]
  local f = redis.pcall('HMGET', jk, 'token', 'state', 'held')
  if not f.err and f[3] and f[1] == ARGV[i + 1] and f[2] == 'active' then
    redis.call('HDEL', jk, 'held')
  end
end
if done > 0 then
  local m = redis.call('HMGET', KEYS[4], 'keep_count', 'keep_age_ms', 'concurrency_limit')
  -- freed slots of a queue with a concurrency limit: wake a worker waiting for one
  if m[3] and redis.call('ZCARD', base .. 'wait') > 0 and redis.call('LLEN', base .. 'marker') == 0 then
    redis.call('RPUSH', base .. 'marker', '1')
  end
  local keep = tonumber(m[1] or ARGV[3])
  local age = tonumber(m[2] or ARGV[4])
  if keep >= 0 then
    local excess = redis.call('ZCARD', KEYS[2]) - keep
    if excess > 0 then
      if excess > 1000 then excess = 1000 end
      local old = redis.call('ZRANGE', KEYS[2], 0, excess - 1)
      for _, id in ipairs(old) do
        redis.call('DEL', prefix .. id, base .. 'children:' .. id, base .. 'children-failed:' .. id)
      end
      redis.call('ZREMRANGEBYRANK', KEYS[2], 0, excess - 1)
    end
  end
  if age >= 0 then
    local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms - age, 'LIMIT', 0, 1000)
    for _, id in ipairs(old) do
      redis.call('DEL', prefix .. id, base .. 'children:' .. id, base .. 'children-failed:' .. id)
      redis.call('ZREM', KEYS[2], id)
    end
  end
end
return codes
