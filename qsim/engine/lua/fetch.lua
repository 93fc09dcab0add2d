--[[ fetch: take up to n waiting jobs (lowest score first) and lock them.

KEYS[1] wait      ZSET waiting ids
KEYS[2] active    ZSET locked ids (score = lock expiry ms)
KEYS[3] meta      HASH queue settings (paused)
KEYS[4] marker    LIST wake-up marker
ARGV[1] job key prefix
ARGV[2] n, the worker's free slots
ARGV[3] lock duration (ms)
ARGV[4] worker id
ARGV[5] token prefix; job k of this call gets the lock token "<prefix>:<k>"

Returns one JSON string (one bulk reply, cheap to parse): an array with one
array per job: [id, token, name, data, attempts_made, max_attempts, backoff,
timeout], all strings. "[]" when the queue is paused or empty. Ids whose
hash is gone are dropped; a hash missing fields is returned with "" for
them (the worker sends it to the DLQ).
]]
if redis.call('HGET', KEYS[3], 'paused') == '1' then
  return '[]'
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local prefix = ARGV[1]
local expiry = now_ms + tonumber(ARGV[3])
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
local out = {}
local k = 0
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = prefix .. id
  local f = redis.call('HMGET', jk, 'name', 'data', 'attempts_made', 'max_attempts', 'backoff', 'timeout', 'started_at')
  if f[1] or redis.call('EXISTS', jk) == 1 then
    k = k + 1
    local tok = ARGV[5] .. ':' .. k
    if f[7] then
      redis.call('HSET', jk, 'state', 'active', 'attempt_started', now_s, 'worker', ARGV[4], 'token', tok)
    else
      redis.call('HSET', jk, 'state', 'active', 'attempt_started', now_s, 'worker', ARGV[4], 'token', tok,
        'started_at', now_s)
    end
    redis.call('ZADD', KEYS[2], expiry, id)
    out[k] = {id, tok, f[1] or '', f[2] or '', f[3] or '0', f[4] or '1', f[5] or '', f[6] or '0'}
  end
end
if #popped > 0 and redis.call('ZCARD', KEYS[1]) > 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], '1')
end
if k == 0 then
  return '[]'
end
return cjson.encode(out)
