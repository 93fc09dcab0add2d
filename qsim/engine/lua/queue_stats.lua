--[[ queue_stats: a queue's depth and the age of its oldest waiting job (for metrics).

KEYS[1] wait      ZSET waiting ids (score = priority * 2^32 + position in the level; job_lib)
KEYS[2] delayed   ZSET delayed ids
KEYS[3] active    ZSET locked ids
KEYS[4] waiting-children ZSET parents waiting for children
KEYS[5] dead      ZSET dead-letter ids
ARGV[1] job key prefix
ARGV[2] at most this many priority levels looked at for the oldest job

Returns {waiting, delayed, active, waiting_children, dead, oldest_age}:
oldest_age is a string, the seconds since the oldest waiting job was enqueued
(its enqueued_at) by Redis's clock, "" when none is waiting. Only the head
(oldest by FIFO order) of each of the ARGV[2] best priority levels is read,
so this costs O(levels * log n), not O(n).
]]
-- @include job_lib
local _, _, now_us = qsim_now()
local now = now_us / 1000000
local SHIFT = 4294967296
local oldest = nil
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local levels = tonumber(ARGV[2])
while head[1] and levels > 0 do
  local enq = redis.pcall('HGET', ARGV[1] .. head[1], 'enqueued_at')  -- (another type: skipped)
  enq = type(enq) == 'string' and tonumber(enq)
  if enq and (not oldest or enq < oldest) then
    oldest = enq
  end
  local level = math.floor(tonumber(head[2]) / SHIFT)
  head = redis.call('ZRANGEBYSCORE', KEYS[1], (level + 1) * SHIFT, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  levels = levels - 1
end
local age = ''
if oldest then
  age = string.format('%.6f', math.max(0, now - oldest))
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]), age}
