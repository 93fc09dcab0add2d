-- flow_lib: helpers shared by the flow scripts and the scripts that finish jobs.
-- Not a script of its own: scripts.lua_source pastes it where a script has the
-- line "-- @include flow_lib". Key layout (see qsim.engine.keys):
--   child hash:  parent (parent id), parent_base ("<prefix>:{<parent queue>}:"),
--                parent_policy ("fail" | "ignore")
--   parent hash: pending_children (children not finished yet),
--                child_failed ("<queue>:<id>: <error>" of the first "fail" child that died)
--   <parent_base>children:<pid>         HASH "<queue>:<id>" -> child return value (JSON)
--   <parent_base>children-failed:<pid>  HASH "<queue>:<id>" -> child error

-- A queue's name from its key base: "qsim:{orders}:" or, in a group,
-- "qsim:{shop}:orders:" -> "orders"
local function qsim_queue_of(base)
  return string.match(base, '}:([^:]+):$') or string.match(base, '{(.-)}') or ''
end

-- Create one job from ARGV[b .. b+9] (id, name, data, priority, delay_ms,
-- max_attempts, backoff, timeout, rate-limit key field, its value) in the queue
-- whose keys start with `base` (checked by qsim_rate_key_mismatch first).
-- `state` "waiting_children" parks it in waiting-children; otherwise it goes
-- to wait or delayed. Returns the id; the caller checked that it is free.
local function qsim_new_job(base, b, state, now_ms, now_s, extra)
  local id = ARGV[b]
  if id == '' then
    repeat
      id = tostring(redis.call('INCR', base .. 'id'))
    until redis.call('EXISTS', base .. 'job:' .. id) == 0
  end
  local prio = tonumber(ARGV[b + 3])
  local delay = tonumber(ARGV[b + 4])
  if state == 'waiting_children' then
    redis.call('ZADD', base .. 'waiting-children', now_ms, id)
  elseif delay > 0 then
    state = 'delayed'
    redis.call('ZADD', base .. 'delayed', now_ms + delay, id)
  else
    state = 'waiting'
    qsim_wait_add(base, id, qsim_back_score(prio, base .. 'seq'), ARGV[b + 8] ~= '' and ARGV[b + 9] or '')
  end
  local hs = qsim_new_fields(b, state, now_s, ARGV[b + 8] ~= '' and ARGV[b + 9] or nil)
  for _, v in ipairs(extra) do hs[#hs + 1] = v end
  redis.call('HSET', base .. 'job:' .. id, unpack(hs))
  return id
end

-- Whether every job spec {base, b} (fields at ARGV[b ..], see qsim_new_job) was read for its
-- queue's rate-limit key (meta rate_key). Returns nil, or the reply {-4, base, key, ...} naming
-- each queue whose key the producer must read its jobs' values for again (nothing is written).
local function qsim_rate_key_mismatch(specs)
  local keys, named, out = {}, {}, nil
  for _, s in ipairs(specs) do
    local base = s[1]
    if keys[base] == nil then
      keys[base] = redis.call('HGET', base .. 'meta', 'rate_key') or ''
    end
    if ARGV[s[2] + 8] ~= keys[base] and not named[base] then
      named[base] = true
      out = out or {-4}
      out[#out + 1] = base
      out[#out + 1] = keys[base]
    end
  end
  return out
end

local function qsim_wake(base)
  if redis.call('LLEN', base .. 'marker') == 0 then
    redis.call('RPUSH', base .. 'marker', '1')
  end
end

-- A child (of the queue with key base `base`) finished: completed (err == nil, value = its return value) or dead
-- (err set). Records it on the parent; a parent in waiting-children moves to
-- waiting once no child is pending, or to the DLQ when a "fail" child died.
-- Idempotent per child (a second report of the same outcome does nothing).
local function qsim_child_finished(base, id, pid, pbase, policy, value, err, now_ms, now_s, maxlen)
  local pk = pbase .. 'job:' .. pid
  local pf = redis.pcall('HMGET', pk, 'state', 'priority', 'name', 'child_failed')
  if pf.err then
    qsim_corrupt(pbase, pid, now_ms, now_s, maxlen)
    return
  end
  if not pf[1] then
    return
  end
  local ref = qsim_queue_of(base) .. ':' .. id
  local vals, fails = pbase .. 'children:' .. pid, pbase .. 'children-failed:' .. pid
  local left
  if err then
    if redis.call('HEXISTS', vals, ref) == 1 or redis.call('HSETNX', fails, ref, err) == 0 then
      return
    end
    left = redis.call('HINCRBY', pk, 'pending_children', -1)
  else
    local was_failed = redis.call('HDEL', fails, ref)
    if redis.call('HSETNX', vals, ref, value) == 0 then
      return
    end
    if was_failed == 1 then
      left = tonumber(redis.call('HGET', pk, 'pending_children') or '0')
    else
      left = redis.call('HINCRBY', pk, 'pending_children', -1)
    end
  end
  if pf[1] ~= 'waiting_children' then
    if err and policy ~= 'ignore' then
      redis.call('HSETNX', pk, 'child_failed', ref .. ': ' .. err)
    end
    return
  end
  if err and policy ~= 'ignore' then
    local perr = 'ChildFailed: child ' .. ref .. ' failed: ' .. err
    redis.call('HSETNX', pk, 'child_failed', ref .. ': ' .. err)
    redis.call('ZREM', pbase .. 'waiting-children', pid)
    redis.call('HSET', pk, 'state', 'dead', 'finished_at', now_s, 'error', perr)
    redis.call('ZADD', pbase .. 'dead', now_ms, pid)
    redis.call('XADD', pbase .. 'events', 'MAXLEN', '~', maxlen, '*', 'event', 'dead', 'job', pid,
      'name', pf[3] or '', 'error', perr)
  elseif left <= 0 and not pf[4] then  -- (a retried parent whose "fail" child is dead waits for its retry)
    redis.call('ZREM', pbase .. 'waiting-children', pid)
    qsim_wait_add(pbase, pid, qsim_back_score(pf[2], pbase .. 'seq'))
    redis.call('HSET', pk, 'state', 'waiting')
    qsim_wake(pbase)
  end
end

-- The key base of queue `queue` in the same prefix and group as the key base `pbase`
-- ("qsim:{inv}:" -> "qsim:{data}:"; in a group "qsim:{shop}:inv:" -> "qsim:{shop}:data:").
local function qsim_base_like(pbase, queue)
  local head = string.match(pbase, '^(.*}:)[^:]+:$')
  if head then
    return head .. queue .. ':'
  end
  return string.match(pbase, '^(.*):{') .. ':{' .. queue .. '}:'
end

-- When parent `pk`'s child_failed names `ref`, the mark moves to another "fail" child still dead
-- (listed in `fails`, the parent's children-failed hash, and still in its queue), or goes.
local function qsim_move_fail_mark(pk, pbase, fails, ref)
  local cf = redis.call('HGET', pk, 'child_failed')
  if not cf or string.sub(cf, 1, #ref + 2) ~= ref .. ': ' then
    return
  end
  redis.call('HDEL', pk, 'child_failed')
  local rest = redis.call('HGETALL', fails)
  for i = 1, #rest, 2 do
    local cq, cid = string.match(rest[i], '^([^:]*):(.*)$')
    if cq and rest[i] ~= ref then
      local pol = redis.pcall('HGET', qsim_base_like(pbase, cq) .. 'job:' .. cid, 'parent_policy')
      if type(pol) == 'string' and pol ~= 'ignore' then
        redis.call('HSET', pk, 'child_failed', rest[i] .. ': ' .. rest[i + 1])
        return
      end
    end
  end
end

-- A dead child (of the queue with key base `base`) was retried from the DLQ: it is outstanding
-- again. Its failure is taken off its parent: the children-failed entry goes, the parent counts
-- it as pending again, and when the parent's child_failed names it, the mark moves to another
-- "fail" child still dead, or goes.
local function qsim_child_retried(base, id, pid, pbase)
  local pk = pbase .. 'job:' .. pid
  local fails = pbase .. 'children-failed:' .. pid
  local ref = qsim_queue_of(base) .. ':' .. id
  if redis.call('TYPE', pk).ok ~= 'hash' or redis.call('HDEL', fails, ref) == 0 then
    return
  end
  redis.call('HINCRBY', pk, 'pending_children', 1)
  qsim_move_fail_mark(pk, pbase, fails, ref)
end

-- A dead "fail" child (of the queue with key base `base`) was purged from the DLQ: it will never run
-- again, so its parent stops waiting for it. A parent that waits in waiting-children for this
-- "fail" child's retry (it was retried itself) goes to the DLQ; the child's failure is taken off
-- the parent (children-failed, child_failed as in qsim_child_retried), so a parent retried later
-- runs once its other children are done, without this one.
local function qsim_child_purged(base, id, pid, pbase, now_ms, now_s, maxlen)
  local pk = pbase .. 'job:' .. pid
  local fails = pbase .. 'children-failed:' .. pid
  local ref = qsim_queue_of(base) .. ':' .. id
  local pf = redis.pcall('HMGET', pk, 'state', 'child_failed', 'name')
  if pf.err or not pf[1] or redis.call('HDEL', fails, ref) == 0 then
    return
  end
  if pf[1] == 'waiting_children' and pf[2] and string.sub(pf[2], 1, #ref + 2) == ref .. ': ' then
    local perr = 'ChildFailed: child ' .. ref .. ' was purged from the dead-letter queue'
    redis.call('ZREM', pbase .. 'waiting-children', pid)
    redis.call('HSET', pk, 'state', 'dead', 'finished_at', now_s, 'error', perr)
    redis.call('ZADD', pbase .. 'dead', now_ms, pid)
    redis.call('XADD', pbase .. 'events', 'MAXLEN', '~', maxlen, '*', 'event', 'dead', 'job', pid,
      'name', pf[3] or '', 'error', perr)
  end
  qsim_move_fail_mark(pk, pbase, fails, ref)
end
