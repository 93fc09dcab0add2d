-- job_lib: helpers shared by the scripts that change a job's state.
-- Not a script of its own: scripts.lua_source pastes it where a script has the
-- line "-- @include job_lib".

-- The job's attempt log (one "start,end,outcome,worker;" entry per attempt, see
-- qsim.engine.job) with `entry` appended, keeping at most QSIM_LOG_MAX bytes of
-- the latest whole entries: a job handed back or stalled over and over cannot
-- grow its hash without limit.
local QSIM_LOG_MAX = 16384
local function qsim_log(log, entry)
  log = (log or '') .. entry
  if #log > QSIM_LOG_MAX then
    local cut = string.find(log, ';', #log - QSIM_LOG_MAX, true)
    if cut and cut < #log then
      log = string.sub(log, cut + 1)
    else
      log = entry
    end
  end
  return log
end
