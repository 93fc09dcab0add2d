--[[ release: hand active jobs back to the waiting set (graceful shutdown).

KEYS[1] active    ZSET locked ids
KEYS[2] wait      ZSET waiting ids
KEYS[3] events    STREAM event stream
KEYS[4] marker    LIST wake-up marker
KEYS[5] seq       STRING FIFO counter (job_lib positions)
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3 + 3*i ..] per job: id, lock token, "1" when its handler was started
        (cut off) or "" when it never was (fetched ahead and handed back: its
        slot did not free within the hold bound, or the worker is stopping; or
        fetched while the worker was stopping)

Released jobs go to the FRONT of their priority level, ahead of the jobs
already waiting there, in the order given (job_lib qsim_push_front; as
BullMQ's moveJobFromActiveToWait). A cut-off attempt is logged as "released"
and does not count. A job never
started leaves no trace of its fetch: no log entry, no stall, and its
started_at is removed when that fetch was its first start. Jobs whose token does not match
are left alone; a job whose key holds another type than a hash goes to the DLQ
and the corrupt set (job_lib). Returns the number of jobs released.
]]
-- @include job_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local n = 0
local front = {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local jk = prefix .. id
  local f = redis.pcall('HMGET', jk, 'token', 'state', 'attempt_started', 'worker', 'priority', 'log', 'name',
    'started_at')
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, ARGV[2])
  elseif f[1] == ARGV[i + 1] and f[2] == 'active' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', jk, 'token', 'held')
    if ARGV[i + 2] == '1' then
      redis.call('HSET', jk, 'state', 'waiting',
        'log', qsim_log(f[6], (f[3] or now_s) .. ',' .. now_s .. ',released,' .. (f[4] or '') .. ';'))
    else
      redis.call('HSET', jk, 'state', 'waiting')
      if f[8] and f[8] == f[3] then
        redis.call('HDEL', jk, 'started_at')
      end
    end
    front[#front + 1] = {id, f[5]}
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'event', 'released', 'job', id, 'name', f[7] or '')
    n = n + 1
  end
end
qsim_push_front(KEYS[2], KEYS[5], front)
if n > 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
return n
