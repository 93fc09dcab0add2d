--[[ retry_dead: move dead-letter jobs back to waiting with fresh attempts.

KEYS[1] dead      ZSET dead-letter ids
KEYS[2] wait      ZSET waiting ids
KEYS[3] events    STREAM event stream
KEYS[4] marker    LIST wake-up marker
KEYS[5] seq       STRING FIFO counter
ARGV[1] job key prefix
ARGV[2] events stream max length (approximate)
ARGV[3] at most this many jobs when no id is given
ARGV[4..] job ids; none = the oldest ARGV[3] dead jobs

attempts_made and stalled restart at 0; error, traceback and the attempt
log are kept. Returns the ids moved back (ids not in the DLQ are skipped).
]]
local prefix = ARGV[1]
local ids = {}
if #ARGV >= 4 then
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
end
local moved = {}
for _, id in ipairs(ids) do
  local jk = prefix .. id
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local prio = redis.call('HGET', jk, 'priority')
    if prio then
      local seq = redis.call('INCR', KEYS[5]) % 4294967296
      redis.call('HSET', jk, 'state', 'waiting', 'attempts_made', 0, 'stalled', 0)
      redis.call('HDEL', jk, 'finished_at', 'token')
      redis.call('ZADD', KEYS[2], (tonumber(prio) or 0) * 4294967296 + seq, id)
      redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'event', 'retried', 'job', id)
      moved[#moved + 1] = id
    end
  end
end
if #moved > 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
return moved
