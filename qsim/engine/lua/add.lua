--[[ add: enqueue one or more jobs (waiting or delayed); an existing id is left alone.

KEYS[1] wait      ZSET waiting ids (score = priority * 2^32 + position; job_lib)
KEYS[2] delayed   ZSET delayed ids (score = due ms)
KEYS[3] marker    LIST wake-up marker
KEYS[4] id        STRING counter for generated ids
KEYS[5] seq       STRING FIFO counter
KEYS[6] meta      HASH queue settings (rate_key)
ARGV[1] job key prefix ("qsim:{q}:job:")
ARGV[2] number of jobs n
ARGV[3] the rate-limit key (payload field) the producer read the jobs for ("" = none)
ARGV[4 + s*i ..] per job: id ("" = generate), name, data (JSON), priority,
        delay_ms, max_attempts, backoff (JSON or ""), timeout (s), and, when
        ARGV[3] is not "", the value of that field in this job (s = 8 or 9)

A keyed queue (meta rate_key) stores each job's key value in its "rkey" field,
as the producer read it from the payload: no script decodes a payload; a
waiting job joins its value's lane too (job_lib qsim_lane_put). When
the jobs were read for another key than the queue's, nothing is written.

Returns a flat array: id_1, created_1, id_2, created_2, ... where created is 1
for a new job, or, when a job with that id already existed (no-op), the
stored job's name (a string), so the caller describes the stored job; or
{-4, job key base, the queue's rate_key} when the producer must read its jobs'
key values again (for that key) and resend.
]]
-- @include job_lib
local prefix = ARGV[1]
local base = string.sub(prefix, 1, -5)
local n = tonumber(ARGV[2])
local rkey = redis.call('HGET', KEYS[6], 'rate_key') or ''
if ARGV[3] ~= rkey then
  return {-4, string.sub(prefix, 1, -5), rkey}
end
local stride = 8
if rkey ~= '' then stride = 9 end
local now_ms, now_s = qsim_now()
local out = {}
local wake = false
-- the counters move once per call, not once per job: the ids to generate are taken in one INCRBY (an id
-- some job already has is skipped, as INCR by INCR), and every job gets the next FIFO position whether it
-- waits or not (qsim_back_position's numbers, with gaps where a job was delayed or already there)
local gen = 0
for i = 0, n - 1 do
  if ARGV[4 + i * stride] == '' then gen = gen + 1 end
end
local next_id = 0
if gen > 0 then next_id = redis.call('INCRBY', KEYS[4], gen) - gen end
local seq = redis.call('INCRBY', KEYS[5], n) - n
local waiting = qsim_batch('ZADD', KEYS[1])
for i = 0, n - 1 do
  local b = 4 + i * stride
  local id = ARGV[b]
  local exists = false
  seq = seq + 1
  if id == '' then
    next_id = next_id + 1
    id = string.format('%d', next_id)
    while redis.call('EXISTS', prefix .. id) == 1 do
      id = tostring(redis.call('INCR', KEYS[4]))
    end
  else
    exists = redis.call('EXISTS', prefix .. id) == 1
  end
  local jk = prefix .. id
  if exists then
    local stored = redis.pcall('HGET', jk, 'name')
    out[#out + 1] = id
    out[#out + 1] = type(stored) == 'string' and stored or ''
  else
    local prio = tonumber(ARGV[b + 3])
    local delay = tonumber(ARGV[b + 4])
    local state = 'waiting'
    if delay > 0 then
      state = 'delayed'
      redis.call('ZADD', KEYS[2], now_ms + delay, id)
    else
      local score = qsim_back_position(prio, seq)
      waiting.add(string.format('%d', score), id)  -- (as text: Redis formats a Lua number at greater cost)
      if rkey ~= '' and qsim_has_lanes(base) then
        qsim_lane_put(base, id, score, ARGV[b + 8])
      end
    end
    redis.call('HSET', jk, unpack(qsim_new_fields(b, state, now_s, rkey ~= '' and ARGV[b + 8] or nil)))
    out[#out + 1] = id
    out[#out + 1] = 1
    wake = true
  end
end
waiting.flush()
if wake and redis.call('LLEN', KEYS[3]) == 0 then
  redis.call('RPUSH', KEYS[3], '1')
end
return out
