--[[ add_flow: add a parent job and its children at once (a flow).

The parent waits in waiting-children until every child is done, then moves
to waiting; a child that goes to the DLQ with policy "fail" sends the parent
to the DLQ (see flow_lib). Children may live in other queues: the script
touches every queue's keys, so on Redis Cluster they must share one slot.

KEYS[1] parent's waiting-children ZSET
KEYS[2..] each child's queue wait ZSET (declared so Cluster routes to one slot)
ARGV[1] parent queue key base ("qsim:{q}:")
ARGV[2..9] parent: id ("" = generate), name, data (JSON), priority, delay_ms
        (ignored), max_attempts, backoff (JSON or ""), timeout (s)
ARGV[10] events stream max length (approximate)
ARGV[11] number of children n
ARGV[12 + 10*i ..] per child: queue key base, on-failure policy ("fail" |
        "ignore"), then the same 8 fields as the parent

Returns {parent id, code, child id 1, ..., child id n}; code 1 added;
0 a job with the parent's id exists (nothing written, no child ids);
-3 a child id is taken (nothing written; the third element is "queue:id").
]]
-- @include job_lib
-- @include flow_lib
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local pbase = ARGV[1]
local n = tonumber(ARGV[11])
if ARGV[2] ~= '' and redis.call('EXISTS', pbase .. 'job:' .. ARGV[2]) == 1 then
  return {ARGV[2], 0}
end
for i = 0, n - 1 do
  local b = 12 + i * 10
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
  local b = 12 + i * 10
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
