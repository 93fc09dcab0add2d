--[[ add_flow: add a parent job and its children at once (a flow).

The parent waits in waiting-children until every child is done, then moves
to waiting; a child that goes to the DLQ with policy "fail" sends the parent
to the DLQ (see flow_lib). Children may live in other queues: the script
touches every queue's keys, so on Redis Cluster they must share one slot.

KEYS[1] parent's waiting-children ZSET
KEYS[2..] each child's queue wait ZSET (declared so Cluster routes to one slot)
ARGV[1] parent queue key base ("qsim:{q}:")
ARGV[2..11] parent: id ("" = generate), name, data (JSON), priority, delay_ms
        (ignored), max_attempts, backoff (JSON or ""), timeout (s), rate-limit key
        field the producer read and its value (see add.lua)
ARGV[12] events stream max length (approximate)
ARGV[13] number of children n
ARGV[14 + 12*i ..] per child: queue key base, on-failure policy ("fail" |
        "ignore"), then the same 10 fields as the parent

Returns {parent id, code, child id 1, ..., child id n}; code 1 added;
0 a job with the parent's id exists (nothing written; the third element is
its stored name, no child ids);
-3 a child id is taken (nothing written; the third element is "queue:id");
-4 a job was read for another rate-limit key than its queue's (nothing
written; then pairs: queue key base, its rate_key).
]]
-- @include job_lib
-- @include flow_lib
local now_ms, now_s = qsim_now()
local pbase = ARGV[1]
local n = tonumber(ARGV[13])
if ARGV[2] ~= '' and redis.call('EXISTS', pbase .. 'job:' .. ARGV[2]) == 1 then
  local stored = redis.pcall('HGET', pbase .. 'job:' .. ARGV[2], 'name')
  return {ARGV[2], 0, type(stored) == 'string' and stored or ''}
end
local specs = {{pbase, 2}}
for i = 0, n - 1 do
  specs[#specs + 1] = {ARGV[14 + i * 12], 14 + i * 12 + 2}
end
local mismatch = qsim_rate_key_mismatch(specs)
if mismatch then
  return {ARGV[2], unpack(mismatch)}
end
for i = 0, n - 1 do
  local b = 14 + i * 12
  if ARGV[b + 2] ~= '' and redis.call('EXISTS', ARGV[b] .. 'job:' .. ARGV[b + 2]) == 1 then
    return {ARGV[2], -3, qsim_queue_of(ARGV[b]) .. ':' .. ARGV[b + 2]}
  end
end
local pstate = 'waiting_children'
if n == 0 then
  pstate = 'waiting'
end
local pid = qsim_new_job(pbase, 2, pstate, now_ms, now_s, {'pending_children', n})
local out = {pid, 1}
local woken = {}
for i = 0, n - 1 do
  local b = 14 + i * 12
  local cid = qsim_new_job(ARGV[b], b + 2, '', now_ms, now_s,
    {'parent', pid, 'parent_base', pbase, 'parent_policy', ARGV[b + 1]})
  out[#out + 1] = cid
  if not woken[ARGV[b]] then
    woken[ARGV[b]] = true
    qsim_wake(ARGV[b])
  end
end
if n == 0 then
  qsim_wake(pbase)
end
return out
