--[[ add_children: a running job adds children (fan-out) and becomes their parent.

Children may live in other queues (on Redis Cluster: in the same slot). Each
child's completion or death is recorded on the parent (see flow_lib); the
parent's pending_children counts the children not finished yet.

KEYS[1] parent's active ZSET
KEYS[2..] each child's queue wait ZSET (declared so Cluster routes to one slot)
ARGV[1] parent queue key base ("qsim:{q}:")
ARGV[2] parent id
ARGV[3] parent lock token
ARGV[4] number of children n
ARGV[5 + 12*i ..] per child: queue key base, on-failure policy ("fail" |
        "ignore"), id ("" = generate), name, data (JSON), priority, delay_ms,
        max_attempts, backoff (JSON or ""), timeout (s), rate-limit key field the
        producer read and its value (see add.lua)

A child whose id exists already as a child of this parent, or that this
parent has already heard from (its children / children-failed hashes, which
outlive trimmed children), is left alone and not counted again: a retried or
resumed handler re-adding children with ids derived from its own is a no-op
for those.

Returns {code, ...}: {1, child id 1, created 1, ..., child id n, created n}
added (created 0: a child of this parent already, left alone); {-1} the token
does not match an active parent (lock lost, nothing written); {-3, "queue:id"}
a child id is taken by a job that is not this parent's child (nothing written);
{-4, base, key, ...} a child was read for another rate-limit key than its
queue's (nothing written; pairs: queue key base, its rate_key).
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local pbase = ARGV[1]
local pid = ARGV[2]
local n = tonumber(ARGV[4])
local f = redis.pcall('HMGET', pbase .. 'job:' .. pid, 'token', 'state')
if f.err then
  qsim_corrupt(pbase, pid, now_ms, now_s, QSIM_EVENTS_MAXLEN)
  return {-1}
end
if f[1] ~= ARGV[3] or f[2] ~= 'active' then
  return {-1}
end
local specs = {}
for i = 0, n - 1 do
  specs[#specs + 1] = {ARGV[5 + i * 12], 5 + i * 12 + 2}
end
local mismatch = qsim_rate_key_mismatch(specs)
if mismatch then
  return mismatch
end
local known = {}
local new = 0
for i = 0, n - 1 do
  local b = 5 + i * 12
  local ref = qsim_queue_of(ARGV[b]) .. ':' .. ARGV[b + 2]
  if ARGV[b + 2] ~= '' and (redis.call('HEXISTS', pbase .. 'children:' .. pid, ref) == 1
      or redis.call('HEXISTS', pbase .. 'children-failed:' .. pid, ref) == 1) then
    known[i] = true
  elseif ARGV[b + 2] ~= '' and redis.call('EXISTS', ARGV[b] .. 'job:' .. ARGV[b + 2]) == 1 then
    local c = redis.pcall('HMGET', ARGV[b] .. 'job:' .. ARGV[b + 2], 'parent', 'parent_base')
    if c.err or c[1] ~= pid or c[2] ~= pbase then
      return {-3, ref}
    end
    known[i] = true
  else
    new = new + 1
  end
end
redis.call('HINCRBY', pbase .. 'job:' .. pid, 'pending_children', new)
local out = {1}
local woken = {}
for i = 0, n - 1 do
  local b = 5 + i * 12
  if known[i] then
    out[#out + 1] = ARGV[b + 2]
    out[#out + 1] = 0
  else
    out[#out + 1] = qsim_new_job(ARGV[b], b + 2, '', now_ms, now_s,
      {'parent', pid, 'parent_base', pbase, 'parent_policy', ARGV[b + 1]})
    out[#out + 1] = 1
    if not woken[ARGV[b]] then
      woken[ARGV[b]] = true
      qsim_wake(ARGV[b])
    end
  end
end
return out
