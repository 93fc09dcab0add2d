--[[ extend_lock: renew the locks of all of a worker's active jobs at once.

KEYS[1] active    ZSET locked ids (score = lock expiry ms)
ARGV[1] job key prefix
ARGV[2] lock duration (ms)
ARGV[3 + 2*i ..] per job: id, lock token

Returns the ids whose lock is lost (token differs, or the job is no longer
active); every other lock now expires lock duration ms from now.
]]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now_ms + tonumber(ARGV[2])
local prefix = ARGV[1]
local lost = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local f = redis.call('HMGET', prefix .. id, 'token', 'state')
  if f[1] == ARGV[i + 1] and f[2] == 'active' and redis.call('ZSCORE', KEYS[1], id) then
    redis.call('ZADD', KEYS[1], 'XX', expiry, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
