--[[ park: a running parent whose children are not done leaves its slot for waiting-children.

KEYS[1] active            ZSET locked ids
KEYS[2] waiting-children  ZSET parents waiting for children (score = ms parked)
ARGV[1] job key prefix
ARGV[2] job id
ARGV[3] lock token

The attempt does not end and does not count: the job's lock token is removed,
state becomes waiting_children, and when its last child finishes (flow_lib)
it moves to waiting and its handler runs again from the start.
Returns 1 parked; 0 not parked, no child is pending (the handler goes on);
2 not parked, a "fail" child died (child_failed is set); -1 lock lost.
]]
local jk = ARGV[1] .. ARGV[2]
local f = redis.call('HMGET', jk, 'token', 'state', 'pending_children', 'child_failed')
if f[1] ~= ARGV[3] or f[2] ~= 'active' then
  return -1
end
if f[4] then
  return 2
end
if (tonumber(f[3]) or 0) <= 0 then
  return 0
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HDEL', jk, 'token')
redis.call('HSET', jk, 'state', 'waiting_children')
redis.call('ZADD', KEYS[2], now_ms, ARGV[2])
return 1
