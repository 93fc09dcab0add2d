--[[ release: hand active jobs back to the waiting set (graceful shutdown cut-off).

KEYS[1] active    ZSET locked ids
KEYS[2] wait      ZSET waiting ids
KEYS[3] events    STREAM event stream
KEYS[4] marker    LIST wake-up marker
KEYS[5] seq       STRING FIFO counter
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3 + 2*i ..] per job: id, lock token

The attempt is logged as "released" and does not count. Jobs whose token
does not match are left alone; a job whose key holds another type than a hash
goes to the DLQ and the corrupt set (job_lib). Returns the number of jobs released.
]]
-- @include job_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local n = 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local jk = prefix .. id
  local f = redis.pcall('HMGET', jk, 'token', 'state', 'attempt_started', 'worker', 'priority', 'log', 'name')
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, ARGV[2])
  elseif f[1] == ARGV[i + 1] and f[2] == 'active' then
    local seq = redis.call('INCR', KEYS[5]) % 4294967296
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', jk, 'token')
    redis.call('HSET', jk, 'state', 'waiting',
      'log', qsim_log(f[6], (f[3] or now_s) .. ',' .. now_s .. ',released,' .. (f[4] or '') .. ';'))
    redis.call('ZADD', KEYS[2], (tonumber(f[5]) or 0) * 4294967296 + seq, id)
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'event', 'released', 'job', id, 'name', f[7] or '')
    n = n + 1
  end
end
if n > 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
return n
