--[[ extend_lock: renew the locks of all of a worker's active jobs at once.

KEYS[1] active    ZSET locked ids (score = lock expiry ms)
ARGV[1] job key prefix
ARGV[2] lock duration (ms)
ARGV[3] events stream max length (approximate)
ARGV[4 + 2*i ..] per job: id, lock token

Returns the ids whose lock is lost (token differs, or the job is no longer
active); every other lock now expires lock duration ms from now. A job whose
key holds another type than a hash is moved to the DLQ and the corrupt set
(job_lib) and counted as lost; the other locks are still renewed.

Renewals go on when Redis is at its maxmemory under noeviction: Redis refuses a
script whose FIRST write may grow memory (ZADD), and lets it run to its end
once it has written. PERSIST on the active set (which never has a TTL) is a
write that cannot grow memory, so it goes first; renewing a score grows
nothing. (A refused renewal would let running jobs' locks expire: they would
be put back, run again, and after max_stalled stalls go to the DLQ.)
]]
-- @include job_lib
redis.call('PERSIST', KEYS[1])
local now_ms, now_s = qsim_now()
local expiry = now_ms + tonumber(ARGV[2])
local prefix = ARGV[1]
local lost = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local f = redis.pcall('HMGET', prefix .. id, 'token', 'state')
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, ARGV[3])
    lost[#lost + 1] = id
  elseif f[1] == ARGV[i + 1] and f[2] == 'active' and redis.call('ZSCORE', KEYS[1], id) then
    redis.call('ZADD', KEYS[1], 'XX', expiry, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
