--[[ progress: store an active job's progress and publish a progress event.

KEYS[1] events    STREAM event stream
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] job id
ARGV[4] lock token
ARGV[5] progress (JSON, already redacted)

Returns 1, or -1 when the token does not match an active job (lock lost; a
job whose key holds another type than a hash goes to the DLQ and the corrupt
set, job_lib).
]]
-- @include job_lib
local jk = ARGV[1] .. ARGV[3]
local f = redis.pcall('HMGET', jk, 'token', 'state', 'name')
if f.err then
  local now_ms, now_s = qsim_now()
  qsim_corrupt(string.sub(ARGV[1], 1, -5), ARGV[3], now_ms, now_s, ARGV[2])
  return -1
end
if f[1] ~= ARGV[4] or f[2] ~= 'active' then
  return -1
end
redis.call('HSET', jk, 'progress', ARGV[5])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'event', 'progress', 'job', ARGV[3], 'name', f[3] or '',
  'progress', ARGV[5])
return 1
