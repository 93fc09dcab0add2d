--[[ park: a running parent whose children are not done leaves its slot for waiting-children.

KEYS[1] active            ZSET locked ids
KEYS[2] waiting-children  ZSET parents waiting for children (score = ms parked)
KEYS[3] wait              ZSET waiting ids
KEYS[4] meta              HASH queue settings (concurrency_limit)
KEYS[5] marker            LIST wake-up marker
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] job id
ARGV[4] lock token

The attempt does not end and does not count: the job's lock token is removed,
state becomes waiting_children, and when its last child finishes (flow_lib)
it moves to waiting and its handler runs again from the start. The slot it
frees wakes an idle worker (marker) when the queue has a concurrency limit
and jobs waiting, as complete and fail do.
Returns 1 parked; 0 not parked, no child is pending (the handler goes on);
2 not parked, a "fail" child died (child_failed is set); -1 lock lost (or
the job key holds another type than a hash: moved to the DLQ and the corrupt
set, job_lib).
]]
-- @include job_lib
local jk = ARGV[1] .. ARGV[3]
local f = redis.pcall('HMGET', jk, 'token', 'state', 'pending_children', 'child_failed')
local now_ms, now_s = qsim_now()
if f.err then
  qsim_corrupt(string.sub(ARGV[1], 1, -5), ARGV[3], now_ms, now_s, ARGV[2])
  return -1
end
if f[1] ~= ARGV[4] or f[2] ~= 'active' then
  return -1
end
if f[4] then
  return 2
end
if (tonumber(f[3]) or 0) <= 0 then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[3])
redis.call('HDEL', jk, 'token', 'held')
redis.call('HSET', jk, 'state', 'waiting_children')
redis.call('ZADD', KEYS[2], now_ms, ARGV[3])
if redis.call('HEXISTS', KEYS[4], 'concurrency_limit') == 1 and redis.call('ZCARD', KEYS[3]) > 0
    and redis.call('LLEN', KEYS[5]) == 0 then
  redis.call('RPUSH', KEYS[5], '1')
end
return 1
