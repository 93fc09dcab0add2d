--[[ purge_dead: delete dead-letter jobs for good.

KEYS[1] dead      ZSET dead-letter ids
ARGV[1] job key prefix
ARGV[2] at most this many jobs per call
ARGV[3] events stream max length (approximate)

A corrupt job's kept-aside value (<job key>:corrupt) and its corrupt-set entry
go too. A purged "fail" child of a flow is taken off its parent (flow_lib
qsim_child_purged): a parent waiting for its retry goes to the DLQ. Returns the
number of jobs deleted (call again while it equals ARGV[2]).
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local base = string.sub(prefix, 1, -5)
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  local f = redis.pcall('HMGET', prefix .. id, 'parent', 'parent_base', 'parent_policy')
  if not f.err and f[1] and f[2] and f[3] ~= 'ignore' then
    qsim_child_purged(base, id, f[1], f[2], now_ms, now_s, ARGV[3])
  end
  redis.call('DEL', prefix .. id, base .. 'children:' .. id, base .. 'children-failed:' .. id)
  if redis.call('SREM', base .. 'corrupt', id) == 1 then
    redis.call('DEL', prefix .. id .. ':corrupt')
  end
  redis.call('ZREM', KEYS[1], id)
end
return #ids
