--[[ retry_dead: move dead-letter jobs back with fresh attempts.

KEYS[1] dead      ZSET dead-letter ids
KEYS[2] wait      ZSET waiting ids
KEYS[3] events    STREAM event stream
KEYS[4] marker    LIST wake-up marker
KEYS[5] seq       STRING FIFO counter
KEYS[6] waiting-children  ZSET parents waiting for children
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] at most this many jobs when no id is given
ARGV[4..] job ids; none = the oldest ARGV[3] dead jobs

attempts_made and stalled restart at 0 (their fields written; a new job has neither: add.lua); error, traceback and the attempt
log are kept. A job goes back to waiting, except a parent (flows, fan-out)
with children still pending or a "fail" child still dead (child_failed): it
waits in waiting-children for them again, and runs once they are done (a dead
"fail" child must be retried too). A retried child of a flow is outstanding
again: its failure is taken off its parent (flow_lib qsim_child_retried).
A corrupt job (its key held another type than a hash, job_lib) stays in the
DLQ. Returns the ids moved back (ids not in the DLQ are skipped).
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local base = string.sub(prefix, 1, -5)
local ids = {}
if #ARGV >= 4 then
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
end
local moved = {}
local wake = false
for _, id in ipairs(ids) do
  local jk = prefix .. id
  local f = redis.call('ZSCORE', KEYS[1], id) and redis.pcall('HMGET', jk, 'priority', 'pending_children',
    'child_failed', 'parent', 'parent_base', 'state')
  if f and f.err then
    qsim_corrupt(base, id, now_ms, now_s, ARGV[2])
  elseif f and f[6] and redis.call('SISMEMBER', base .. 'corrupt', id) == 0 then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HSET', jk, 'attempts_made', 0, 'stalled', 0)
    redis.call('HDEL', jk, 'finished_at', 'token')
    if (tonumber(f[2]) or 0) > 0 or f[3] then
      redis.call('HSET', jk, 'state', 'waiting_children')
      redis.call('ZADD', KEYS[6], now_ms, id)
    else
      redis.call('HSET', jk, 'state', 'waiting')
      qsim_wait_add(base, id, qsim_back_score(f[1], KEYS[5]))
      wake = true
    end
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'event', 'retried', 'job', id)
    if f[4] and f[5] then
      qsim_child_retried(base, id, f[4], f[5])
    end
    moved[#moved + 1] = id
  end
end
if wake and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
return moved
