--[[ mark_started: jobs fetched ahead (marked held by fetch) whose handler has started.

KEYS[1] active    ZSET locked ids (declared so Cluster routes the call to the queue's slot)
ARGV[1] job key prefix
ARGV[2 + 2*i ..] per job: id, lock token

Clears the "held" field of each job still active under that token: from now on a stalled
check counts a stall for it if its worker dies (a job that crashes its worker must reach the
DLQ after max_stalled stalls), where a job that never started is put back without one.
Jobs whose token differs, or that are no longer active (completed in the same batch), are
left alone. Returns the number of jobs cleared.
]]
local prefix = ARGV[1]
local n = 0
for i = 2, #ARGV, 2 do
  local jk = prefix .. ARGV[i]
  local f = redis.pcall('HMGET', jk, 'token', 'state', 'held')
  if not f.err and f[3] and f[1] == ARGV[i + 1] and f[2] == 'active' then
    redis.call('HDEL', jk, 'held')
    n = n + 1
  end
end
return n
