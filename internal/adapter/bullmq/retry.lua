--[[
  expiryctl's retry of one failed BullMQ 5 or 6 job, for a replay: BullMQ's
  own reprocessJob (Job.retry('failed')) for the move, in the layout of the
  release the queue's meta names, checked against the incarnation the
  letter captured and marked with the replay, atomically.

  KEYS[1]  job hash              PREFIX:QUEUE:ID
  KEYS[2]  events stream         PREFIX:QUEUE:events
  KEYS[3]  failed zset
  KEYS[4]  wait list
  KEYS[5]  meta hash
  KEYS[6]  paused list           (BullMQ 5's; 6 only reads what 5 left)
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
  ARGV[8]  BullMQ 5's meta version prefix ("bullmq:5."): a paused queue
           keeps its jobs in the paused list
  ARGV[9]  BullMQ 6's meta version prefix ("bullmq:6."): a paused queue
           keeps its jobs in wait, and only meta says it is paused

  Returns {code, detail}:
    {"retried", target}   moved to wait, paused or prioritized
    {"marked", ""}        this item of this request retried it already
    {"deleted", ""}       no job hash
    {"moved", state}      no longer the failed job captured: state says
                          what it is now
    {"version", version}  the queue's meta names another BullMQ, or none
    {"missing", ""}       the queue has no meta hash: no Queue opened it
]]
local rcall = redis.call
local jobKey = KEYS[1]
local jobId = ARGV[1]

-- The layout is read here, in the same atomic step as the move, so that a
-- queue upgraded while a replay runs is written the way its new release
-- reads it. A version names a layout when it is the prefix and a number.
local function names(version, prefix)
  return string.sub(version, 1, #prefix) == prefix and
    (string.find(version, "^%d+%.", #prefix + 1) or string.find(version, "^%d+$", #prefix + 1)) ~= nil
end
local version = rcall("HGET", KEYS[5], "version")
local pausedList
if version and names(version, ARGV[8]) then
  pausedList = true
elseif version and names(version, ARGV[9]) then
  pausedList = false
elseif not version and rcall("EXISTS", KEYS[5]) == 0 then
  return {"missing", ""}
else
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

-- BullMQ 5's getTargetQueueList, 6's isQueuePausedOrMaxed: a paused
-- queue's job goes to the paused list in 5 and to wait in 6, with no
-- marker in either; nor does a queue at its global concurrency get one,
-- as BullMQ's own moves give it none.
local meta = rcall("HMGET", KEYS[5], "paused", "concurrency")
local target, pausedOrMaxed = KEYS[4], false
if meta[1] then
  pausedOrMaxed = true
  if pausedList then
    target = KEYS[6]
  end
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
  -- BullMQ 6's reprocessJob place a prioritized job, in either release; a
  -- paused queue's workers do not take from prioritized until it resumes.
  local counter = rcall("INCR", KEYS[10])
  rcall("ZADD", KEYS[9], priority * 0x100000000 + counter % 0x100000000, jobId)
  where = "prioritized"
end
if not pausedOrMaxed then
  -- addBaseMarkerIfNeeded: wakes a worker blocked on the marker.
  rcall("ZADD", KEYS[8], 0, "0")
end

-- A child of a flow goes back among its parent's pending dependencies, as
-- reprocessJob does it for a failed child (6's
-- moveChildBackToParentDependencies, the same steps).
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
