--[[ recover_stalled: put back active jobs whose lock expired (their worker died).

KEYS[1] active    ZSET locked ids (score = lock expiry ms)
KEYS[2] wait      ZSET waiting ids
KEYS[3] dead      ZSET dead-letter ids
KEYS[4] events    STREAM event stream
KEYS[5] marker    LIST wake-up marker
KEYS[6] seq       STRING FIFO counter (job_lib positions)
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] max_stalled: a job stalled more often than this goes to the DLQ
ARGV[4] at most this many jobs per call

Each such job gets stalled + 1, its lock token is removed (a late completion
is refused) and its attempt is logged as "stalled"; a stall does not count
as an attempt. A job whose handler never started (fetched ahead, still marked
held: its worker died or froze while it waited for a slot) is put back the
same way but counts no stall and logs no attempt, as a hand-back of a job
never started does (release); its started_at is removed when that fetch was
its first start. A job put back goes to the FRONT of its priority level, ahead
of the jobs already waiting there (job_lib qsim_push_front; as BullMQ's
stalled jobs go to the consuming end of its wait list); the jobs of one call
keep the order of their lock expiry. Returns {requeued ids, dead ids, ids put back
never started}. A child of a flow that goes
to the DLQ is recorded on its parent (flow_lib). A job whose key holds another
type than a hash goes to the DLQ and the corrupt set (job_lib), listed as dead.
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local maxlen = ARGV[2]
local max_stalled = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[4]))
local requeued, dead, front, unstarted = {}, {}, {}, {}
for _, id in ipairs(ids) do
  local jk = prefix .. id
  local f = redis.pcall('HMGET', jk, 'state', 'attempt_started', 'worker', 'stalled', 'priority', 'log', 'name',
    'attempts_made', 'parent', 'parent_base', 'parent_policy', 'held', 'started_at')
  redis.call('ZREM', KEYS[1], id)
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, maxlen)
    dead[#dead + 1] = id
  elseif f[1] == 'active' and f[12] then
    redis.call('HDEL', jk, 'token', 'held')
    redis.call('HSET', jk, 'state', 'waiting')
    if f[13] and f[13] == f[2] then
      redis.call('HDEL', jk, 'started_at')
    end
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'released', 'job', id, 'name', f[7] or '')
    front[#front + 1] = {id, f[5]}
    unstarted[#unstarted + 1] = id
  elseif f[1] == 'active' then
    local stalled = (tonumber(f[4]) or 0) + 1
    redis.call('HDEL', jk, 'token')
    redis.call('HSET', jk, 'stalled', stalled,
      'log', qsim_log(f[6], (f[2] or now_s) .. ',' .. now_s .. ',stalled,' .. (f[3] or '') .. ';'))
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'stalled', 'job', id, 'name', f[7] or '',
      'stalled', stalled)
    if stalled > max_stalled then
      local err = 'StalledError: job stalled ' .. stalled .. ' times (max_stalled=' .. max_stalled .. ')'
      redis.call('HSET', jk, 'state', 'dead', 'finished_at', now_s, 'error', err,
        'attempts_made', (tonumber(f[8]) or 0) + 1)
      redis.call('ZADD', KEYS[3], now_ms, id)
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'event', 'dead', 'job', id, 'name', f[7] or '', 'error', err)
      dead[#dead + 1] = id
      if f[9] then
        qsim_child_finished(string.sub(prefix, 1, -5), id, f[9], f[10], f[11], nil, err, now_ms, now_s, maxlen)
      end
    else
      redis.call('HSET', jk, 'state', 'waiting')
      front[#front + 1] = {id, f[5]}
      requeued[#requeued + 1] = id
    end
  end
end
qsim_push_front(KEYS[2], KEYS[6], front)
if #front > 0 and redis.call('LLEN', KEYS[5]) == 0 then
  redis.call('RPUSH', KEYS[5], '1')
end
return {requeued, dead, unstarted}
