--[[ purge_dead: delete dead-letter jobs for good.

KEYS[1] dead      ZSET dead-letter ids
ARGV[1] job key prefix
ARGV[2] at most this many jobs per call

Returns the number of jobs deleted (call again while it equals ARGV[2]).
]]
local prefix = ARGV[1]
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  redis.call('DEL', prefix .. id, string.sub(prefix, 1, -5) .. 'children:' .. id,
    string.sub(prefix, 1, -5) .. 'children-failed:' .. id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids
