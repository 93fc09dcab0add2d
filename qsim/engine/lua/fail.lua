--[[ fail: record failed attempts of a batch of active jobs; retry or move to the DLQ.

KEYS[1] active    ZSET locked ids
KEYS[2] wait      ZSET waiting ids
KEYS[3] delayed   ZSET delayed ids (score = due ms)
KEYS[4] dead      ZSET dead-letter ids (score = time of death ms)
KEYS[5] events    STREAM event stream
KEYS[6] marker    LIST wake-up marker
KEYS[7] seq       STRING FIFO counter (job_lib positions)
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3 + 7*i ..] per job: id, lock token, error (one line), traceback,
        retry delay ms (-1 = unrecoverable: no retry whatever attempts are left),
        outcome: "timeout" when the attempt ran past the job's timeout (the worker
        knows), else "failed"; the attempt log records it; µs the job waited in the
        worker for a free slot (0 unless fetched ahead; see complete.lua)

A job is retried while attempts_made (after this failure) < max_attempts.
With a concurrency_limit in the queue's meta (<base>meta) and jobs waiting, the marker is pushed.
Returns one code per job:
   1 retry now (waiting)      2 retry later (delayed)      3 dead (DLQ)
   0 already handled with this token (a retried call): nothing done
  -1 lock lost: refused       -2 no such job
  -3 the job key holds another type than a hash: moved to the DLQ and the
     corrupt set (job_lib); the rest of the batch goes on
A child of a flow that goes to the DLQ is recorded on its parent (flow_lib).
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local maxlen = ARGV[2]
local codes = {}
local wake = false
for i = 3, #ARGV, 7 do
  local id = ARGV[i]
  local jk = prefix .. id
  local f = redis.pcall('HMGET', jk, 'token', 'state', 'attempt_started', 'worker', 'attempts_made',
    'max_attempts', 'priority', 'log', 'name', 'parent', 'parent_base', 'parent_policy', 'held', 'started_at')
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, maxlen)
    codes[#codes + 1] = -3
  elseif not f[2] then
    codes[#codes + 1] = -2
  elseif f[1] ~= ARGV[i + 1] then
    codes[#codes + 1] = -1
  elseif f[2] ~= 'active' then
    codes[#codes + 1] = 0
  else
    local made = (tonumber(f[5]) or 0) + 1
    local name = f[9] or ''
    local delay = tonumber(ARGV[i + 4])
    local err = ARGV[i + 2]
    local outcome = 'failed'
    if ARGV[i + 5] == 'timeout' then outcome = 'timeout' end
    redis.call('ZREM', KEYS[1], id)
    if f[13] then redis.call('HDEL', jk, 'held') end  -- (its start notice was still on its way)
    local hs = {'attempts_made', made, 'error', err, 'traceback', ARGV[i + 3]}
    local started = qsim_held_start(hs, f[3], f[14], tonumber(ARGV[i + 6]) or 0, now_s)
    hs[#hs + 1] = 'log'
    hs[#hs + 1] = qsim_log(f[8], (started or now_s) .. ',' .. now_s .. ',' .. outcome .. ',' .. (f[4] or '') .. ';')
    redis.call('HSET', jk, unpack(hs))
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', 'event', 'failed', 'job', id, 'name', name,
      'error', err, 'attempt', made)
    if delay < 0 or made >= (tonumber(f[6]) or 1) then
      redis.call('HSET', jk, 'state', 'dead', 'finished_at', now_s)
      redis.call('ZADD', KEYS[4], now_ms, id)
      redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', 'event', 'dead', 'job', id, 'name', name, 'error', err)
      codes[#codes + 1] = 3
      if f[10] then
        qsim_child_finished(string.sub(prefix, 1, -5), id, f[10], f[11], f[12], nil, err, now_ms, now_s, maxlen)
      end
    elseif delay > 0 then
      redis.call('HSET', jk, 'state', 'delayed')
      redis.call('ZADD', KEYS[3], now_ms + delay, id)
      redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', 'event', 'retrying', 'job', id, 'name', name,
        'delay', string.format('%.3f', delay / 1000))
      codes[#codes + 1] = 2
      wake = true
    else
      redis.call('HSET', jk, 'state', 'waiting')
      qsim_wait_add(string.sub(prefix, 1, -5), id, qsim_back_score(f[7], KEYS[7]))
      redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', 'event', 'retrying', 'job', id, 'name', name, 'delay', 0)
      codes[#codes + 1] = 1
      wake = true
    end
  end
end
-- freed slots of a queue with a concurrency limit: wake a worker waiting for one
if not wake and redis.call('ZCARD', KEYS[2]) > 0
    and redis.call('HEXISTS', string.sub(KEYS[2], 1, -5) .. 'meta', 'concurrency_limit') == 1 then
  for _, c in ipairs(codes) do
    if c > 0 then wake = true end
  end
end
if wake and redis.call('LLEN', KEYS[6]) == 0 then
  redis.call('RPUSH', KEYS[6], '1')
end
return codes
