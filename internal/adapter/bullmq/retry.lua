--[[
  expiryctl's retry of one failed BullMQ 5 job, for a replay: BullMQ's own
  reprocessJob (Job.retry('failed')) for the move, checked against the
  incarnation the letter captured and marked with the replay, atomically.

  KEYS[1]  job hash              PREFIX:QUEUE:ID
  KEYS[2]  events stream         PREFIX:QUEUE:events
  KEYS[3]  failed zset
  KEYS[4]  wait list
  KEYS[5]  meta hash
  KEYS[6]  paused list
  KEYS[7]  active list
  KEYS[8]  marker zset
  KEYS[9]  prioritized zset
  KEYS[10] priority counter      PREFIX:QUEUE:pc
  KEYS[11] completed zset        (only read, to say where a job went)
  KEYS[12] delayed zset          (idem)
  KEYS[13] waiting-children zset (idem)

  ARGV[1]  job id
  ARGV[2]  the captured finishedOn
  ARGV[3]  the captured attemptsMade
  ARGV[4]  the marks: a JSON object, written to the hash field ARGV[7]
  ARGV[5]  the replay request id the marks name
  ARGV[6]  the replay item id the marks name
  ARGV[7]  the mark field ("expiryctl")
  ARGV[8]  the supported meta version prefix ("bullmq:5.")

  Returns {code, detail}:
    {"retried", target}   moved to wait, paused or prioritized
    {"marked", ""}        this item of this request retried it already
    {"deleted", ""}       no job hash
    {"moved", state}      no longer the failed job captured: state says
                          what it is now
    {"version", version}  the queue's meta names another BullMQ
]]
local rcall = redis.call
local jobKey = KEYS[1]
local jobId = ARGV[1]

-- The layout is checked here, in the same atomic step as the move, so that
-- a queue upgraded while a replay runs is never written the old way.
local version = rcall("HGET", KEYS[5], "version")
if not version or string.sub(version, 1, #ARGV[8]) ~= ARGV[8] then
  return {"version", version or ""}
end

if rcall("EXISTS", jobKey) == 0 then
  return {"deleted", ""}
end

-- cjson reads numbers as doubles: whole ones are compared as integers.
local function text(v)
  if type(v) == "number" then
    return string.format("%.0f", v)
  end
  if v == nil or v == cjson.null then
    return ""
  end
  return tostring(v)
end

local mark = rcall("HGET", jobKey, ARGV[7])
if mark then
  local ok, m = pcall(cjson.decode, mark)
  if ok and type(m) == "table" and text(m["x-replay-request"]) == ARGV[5] and
    text(m["x-replay-item"]) == ARGV[6] then
    return {"marked", ""}
  end
end

local fields = rcall("HMGET", jobKey, "finishedOn", "atm", "attemptsMade", "priority", "opts", "parentKey")
local finishedOn = fields[1] or ""
local attemptsMade = fields[2] or fields[3] or "0"

if not rcall("ZSCORE", KEYS[3], jobId) then
  -- Where it is now, for the operator: BullMQ's getState looks in the same
  -- places. LPOS is Redis 6.0.6's; without it the list states go unnamed.
  if rcall("ZSCORE", KEYS[11], jobId) then return {"moved", "completed"} end
  if rcall("ZSCORE", KEYS[12], jobId) then return {"moved", "delayed"} end
  if rcall("ZSCORE", KEYS[9], jobId) then return {"moved", "prioritized"} end
  if rcall("ZSCORE", KEYS[13], jobId) then return {"moved", "waiting-children"} end
  for _, l in ipairs({{KEYS[7], "active"}, {KEYS[4], "waiting"}, {KEYS[6], "paused"}}) do
    local found = redis.pcall("LPOS", l[1], jobId)
    if type(found) == "number" then return {"moved", l[2]} end
  end
  return {"moved", "in no state of the queue"}
end

if finishedOn ~= ARGV[2] or attemptsMade ~= ARGV[3] then
  return {"moved", "failed again at finishedOn " .. finishedOn .. " after " .. attemptsMade .. " attempts"}
end

-- reprocessJob: out of the failed set, what a finished run left reset.
-- The attempt counts stay, as Job.retry() leaves them by default: the
-- worker sees the retry BullMQ's own retry would give it.
rcall("ZREM", KEYS[3], jobId)
rcall("HDEL", jobKey, "finishedOn", "processedOn", "failedReason")
rcall("HSET", jobKey, ARGV[7], ARGV[4])

-- getTargetQueueList: paused when meta says so; a queue at its global
-- concurrency gets no marker, as BullMQ's own moves give it none.
local meta = rcall("HMGET", KEYS[5], "paused", "concurrency")
local target, pausedOrMaxed = KEYS[4], false
if meta[1] then
  target, pausedOrMaxed = KEYS[6], true
elseif meta[2] and rcall("LLEN", KEYS[7]) >= tonumber(meta[2]) then
  pausedOrMaxed = true
end

local priority = tonumber(fields[4]) or 0
local where
if priority == 0 then
  local lifo = false
  local ok, opts = pcall(cjson.decode, fields[5] or "{}")
  if ok and type(opts) == "table" and opts["lifo"] == true then
    lifo = true
  end
  -- addJobInTargetList: workers take from the right of wait.
  rcall(lifo and "RPUSH" or "LPUSH", target, jobId)
  where = target == KEYS[6] and "paused" or "waiting"
else
  -- addJobWithPriority, as BullMQ's own automatic retry (retryJob) and
  -- BullMQ 6's reprocessJob place a prioritized job; a paused queue's
  -- workers do not take from prioritized until it resumes.
  local counter = rcall("INCR", KEYS[10])
  rcall("ZADD", KEYS[9], priority * 0x100000000 + counter % 0x100000000, jobId)
  where = "prioritized"
end
if not pausedOrMaxed then
  -- addBaseMarkerIfNeeded: wakes a worker blocked on the marker.
  rcall("ZADD", KEYS[8], 0, "0")
end

-- A child of a flow goes back among its parent's pending dependencies, as
-- reprocessJob does it for a failed child.
local parentKey = fields[6]
if parentKey and rcall("EXISTS", parentKey) == 1 then
  if rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1 or
    rcall("HDEL", parentKey .. ":failed", jobKey) == 1 then
    rcall("SADD", parentKey .. ":dependencies", jobKey)
  end
end

-- getOrSetMaxEvents, then the waiting event QueueEvents listeners expect.
local maxEvents = rcall("HGET", KEYS[5], "opts.maxLenEvents")
if not maxEvents then
  maxEvents = 10000
  rcall("HSET", KEYS[5], "opts.maxLenEvents", maxEvents)
end
rcall("XADD", KEYS[2], "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId, "prev", "failed")
return {"retried", where}
