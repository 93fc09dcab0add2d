--[[ promote: move delayed jobs that are due into the waiting set.

KEYS[1] delayed   ZSET delayed ids (score = due ms)
KEYS[2] wait      ZSET waiting ids
KEYS[3] seq       STRING FIFO counter
KEYS[4] marker    LIST wake-up marker
ARGV[1] job key prefix
ARGV[2] at most this many jobs per call
ARGV[3] events stream max length (approximate)
ARGV[4] "1": re-arm the marker: push it when jobs wait and it is empty, promoted or not (an idle
        worker's check after its blocking wait timed out: a wake-up taken by a worker that died
        before it fetched is given again, and the waiting workers fetch only when there is work)

A job whose key holds another type than a hash goes to the DLQ and the
corrupt set (job_lib). Returns ms until the next delayed job is due (0 when more are due now),
or -1 when no job is delayed.
]]
-- @include job_lib
local now_ms, now_s = qsim_now()
local prefix = ARGV[1]
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local jk = prefix .. id
  local f = redis.pcall('HMGET', jk, 'state', 'priority')
  if f.err then
    qsim_corrupt(string.sub(prefix, 1, -5), id, now_ms, now_s, ARGV[3])
  elseif f[1] then
    qsim_wait_add(string.sub(prefix, 1, -5), id, qsim_back_score(f[2], KEYS[3]))
    redis.call('HSET', jk, 'state', 'waiting')
  end
end
if (#due > 0 or (ARGV[4] == '1' and redis.call('ZCARD', KEYS[2]) > 0)) and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if nxt[1] then
  local left = tonumber(nxt[2]) - now_ms
  if left < 0 then left = 0 end
  return left
end
return -1
