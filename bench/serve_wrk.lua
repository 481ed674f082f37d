-- bench/serve_wrk.lua: wrk load for `rewardctl serve` (bench/SERVE.md). Every request is a claim
-- with a biz id of its own (the wrk thread's number, a random nonce of this run and a counter), for a
-- user drawn from USERS ids; the answers are read, and done() prints how many were granted (code 0)
-- and the counts of the other codes (a refusal is HTTP 200 with its own code, which wrk alone counts
-- as a success).
--
--   wrk -t2 -c16 -d10s -s bench/serve_wrk.lua http://127.0.0.1:PORT/v1/claims   [-- ACTIVITY [USERS [TOKEN]]]
--   wrk ... http://127.0.0.1:PORT/api/receive -- ACTIVITY                       (the seeds' endpoint)
-- ACTIVITY defaults to "bench", USERS to 100000; TOKEN is sent as a bearer token (a server without
-- --no-auth).
local threads = {}
local next_id = 1

function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  activity = args[1] or "bench"
  users = tonumber(args[2] or "100000")
  local f = io.open("/dev/urandom", "rb")
  local b = f:read(4)
  f:close()
  local nonce = 0
  for i = 1, 4 do nonce = nonce * 256 + b:byte(i) end
  math.randomseed(nonce + tid)
  prefix = string.format("wrk%08x_%d_", nonce, tid)
  receive = wrk.path:find("/api/receive", 1, true) ~= nil
  headers = { ["Content-Type"] = "application/json" }
  if args[3] then headers["Authorization"] = "Bearer " .. args[3] end
  n, granted, other, codes = 0, 0, 0, {}
end

function request()
  n = n + 1
  local biz = prefix .. n
  local user = "u" .. math.random(1, users)
  local body
  if receive then
    body = string.format('{"activityCode":"%s","userId":"%s","bizId":"%s","channel":"wrk"}', activity, user, biz)
  else
    body = string.format('{"activity":"%s","user":"%s","biz_id":"%s"}', activity, user, biz)
  end
  return wrk.format("POST", wrk.path, headers, body)
end

function response(status, hdrs, body)
  local code = body:match('^{"code":(%-?%d+)')
  if code == "0" then
    granted = granted + 1
  else
    other = other + 1
    local k = tostring(status) .. "/" .. tostring(code)
    codes[k] = (codes[k] or 0) + 1
  end
end

function done(summary, latency, requests)
  local g, o, all = 0, 0, {}
  for _, t in ipairs(threads) do
    g = g + t:get("granted")
    o = o + t:get("other")
    for k, v in pairs(t:get("codes")) do all[k] = (all[k] or 0) + v end
  end
  io.write(string.format("granted (code 0): %d, other answers: %d\n", g, o))
  for k, v in pairs(all) do io.write(string.format("  http/code %s: %d\n", k, v)) end
  io.write(string.format("latency p50 %.2f ms, p99 %.2f ms\n", latency:percentile(50) / 1000,
                         latency:percentile(99) / 1000))
end
