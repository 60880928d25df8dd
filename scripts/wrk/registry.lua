-- wrk scripts for scripts/bench-http.sh. Arguments: MODE DEPTH [COUNT] [HEADERS]
--   MODE  list | beat | register | floor
--   DEPTH requests per write (1 = plain, 16 = pipelined)
--   COUNT for beat: how many registered instances to cycle through
--   HEADERS java: the headers the Nacos Java 1.4 client sends (~480-byte
--         beats instead of ~110), to see how request size meets buffer sizes
local mode, depth, count, counter = "floor", 1, 1, 0

function init(args)
  mode = args[1] or "floor"
  depth = tonumber(args[2] or "1")
  count = tonumber(args[3] or "1")
  -- Each wrk thread gets its own id space so registrations never collide.
  counter = math.random(0, 1000) * 1000000
  if args[4] == "java" then
    wrk.headers["Client-Version"] = "Nacos-Java-Client:v1.4.6"
    wrk.headers["User-Agent"] = "Nacos-Java-Client:v1.4.6"
    wrk.headers["Accept-Encoding"] = "gzip,deflate,sdch"
    wrk.headers["RequestId"] = "0b5c6f1e-4a42-4f4e-9d6e-3c2f0a1b2c3d"
    wrk.headers["Request-Module"] = "Naming"
    wrk.headers["Content-Type"] = "application/x-www-form-urlencoded;charset=UTF-8"
    wrk.headers["Connection"] = "Keep-Alive"
    wrk.headers["Content-Length"] = "0"
  end
end

local function ip_of(i)
  return string.format("10.%d.%d.%d", math.floor(i / 65536) % 256, math.floor(i / 256) % 256, i % 256)
end

local function one()
  if mode == "list" then
    return wrk.format("GET", "/nacos/v1/ns/instance/list?serviceName=bench-list")
  elseif mode == "beat" then
    local i = counter % count
    counter = counter + 1
    return wrk.format("PUT", "/nacos/v1/ns/instance/beat?serviceName=bench-beat-" .. (i % math.max(1, math.floor(count / 10))) .. "&ip=" .. ip_of(i) .. "&port=8080")
  elseif mode == "register" then
    local i = counter
    counter = counter + 1
    return wrk.format("POST", "/nacos/v1/ns/instance?serviceName=bench-reg-" .. (i % 50000) .. "&ip=" .. ip_of(i) .. "&port=" .. (1000 + math.floor(i / 16777216)))
  else
    return wrk.format("GET", "/floor")
  end
end

-- Beats cycle over a fixed set of instances, and list and floor requests never
-- change, so every batch is built once, on the first call: formatting requests
-- in Lua costs a few microseconds each and capped one wrk thread near 100k
-- requests/s, far below what the server answers, so such a run measured wrk,
-- not the server. Registrations are made anew each time (they must not repeat).
local prebuilt, next_batch = nil, 0

local function batch_of_one_each()
  if depth == 1 then
    return one()
  end
  local batch = {}
  for n = 1, depth do
    batch[n] = one()
  end
  return table.concat(batch)
end

function request()
  if mode == "register" then
    return batch_of_one_each()
  end
  if prebuilt == nil then
    prebuilt = {}
    -- Enough batches to visit every instance at least once (one for list
    -- and floor: count is 1).
    for b = 1, math.ceil(count / depth) do
      prebuilt[b] = batch_of_one_each()
    end
  end
  next_batch = next_batch % #prebuilt + 1
  return prebuilt[next_batch]
end
