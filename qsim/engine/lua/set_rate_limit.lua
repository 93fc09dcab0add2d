--[[ set_rate_limit: set or remove a queue's rate limit, keeping its lanes right.

KEYS[1] meta        HASH rate_max, rate_per_ms, rate_key, lanes
KEYS[2] marker      LIST wake-up marker
KEYS[3] lanes       ZSET open lanes of a keyed limit (job_lib)
KEYS[4] lanes-shut  ZSET shut lanes of a keyed limit
KEYS[5] active      ZSET locked ids
KEYS[6] ratelimit   ZSET recent starts of the queue's (unkeyed) window (score = us, member = token)
ARGV[1] max starts per window ("" removes the limit)
ARGV[2] window length (ms)
ARGV[3] the payload field that keys the limit ("" = one window for the whole queue)

When the key changes (or the limit goes), the lanes of the old key are dropped and
meta lanes is cleared: the next fetch builds the lanes of the new key from the wait
set. When it stays, every shut lane is reopened (the next fetch checks its window
under the new max and per). Wakes the workers (marker). Returns 1.
When an unkeyed limit starts (none before, or a keyed one), every job locked now
counts as a start now in the window: jobs fetched before it (a worker may still
hold some, fetched ahead) start after it, and the limit must count them.
]]
-- @include job_lib
local base = string.sub(KEYS[1], 1, -5)
local old = redis.call('HGET', KEYS[1], 'rate_key') or ''
local had = redis.call('HEXISTS', KEYS[1], 'rate_max') == 1
local new = ''
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'rate_max', 'rate_per_ms', 'rate_key')
else
  new = ARGV[3]
  redis.call('HSET', KEYS[1], 'rate_max', ARGV[1], 'rate_per_ms', ARGV[2], 'rate_key', new)
  if new == '' and (not had or old ~= '') then
    local _, _, now_us = qsim_now()
    local locked = redis.call('ZRANGE', KEYS[5], 0, -1)
    for _, id in ipairs(locked) do redis.call('ZADD', KEYS[6], now_us, 'fetched:' .. id) end
    if #locked > 0 then redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[2]) + 1000) end
  end
end
if old ~= new then
  for _, set in ipairs({KEYS[3], KEYS[4]}) do
    for _, v in ipairs(redis.call('ZRANGE', set, 0, -1)) do redis.call('DEL', base .. 'lane:' .. v) end
    redis.call('DEL', set)
  end
  redis.call('HDEL', KEYS[1], 'lanes')
else
  for _, v in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    local h = redis.call('ZRANGE', base .. 'lane:' .. v, 0, 0, 'WITHSCORES')
    if h[1] then redis.call('ZADD', KEYS[3], h[2], v) end
  end
  redis.call('DEL', KEYS[4])
end
redis.call('RPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], -1, -1)
return 1
