--[[ purge_dead: delete dead-letter jobs for good.

KEYS[1] dead      ZSET dead-letter ids
ARGV[1] job key prefix
ARGV[2] at most this many jobs per call

A corrupt job's kept-aside value (<job key>:corrupt) and its corrupt-set entry
go too. Returns the number of jobs deleted (call again while it equals ARGV[2]).
]]
local prefix = ARGV[1]
local base = string.sub(prefix, 1, -5)
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  redis.call('DEL', prefix .. id, base .. 'children:' .. id, base .. 'children-failed:' .. id)
  if redis.call('SREM', base .. 'corrupt', id) == 1 then
    redis.call('DEL', prefix .. id .. ':corrupt')
  end
  redis.call('ZREM', KEYS[1], id)
end
return #ids
