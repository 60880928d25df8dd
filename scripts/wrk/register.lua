-- wrk script for scripts/bench-register.sh. Arguments: MODE [DEPTH]
--   fresh  every request registers into a new service (bench-fresh-N)
--   large  re-registers the 10,000 instances of bench-large, the weight
--          alternating by pass, so every request is a real write into a
--          service of 10,000 instances (the script fills it first)
--   grow   1,000 services (bench-grow-N) growing by one instance a request:
--          400,000 requests leave 400 instances in each
local mode, depth, counter = "fresh", 1, 0

function init(args)
  mode = args[1] or "fresh"
  depth = tonumber(args[2] or "1")
  -- Each wrk thread (one here) starts where no other would collide.
  counter = math.random(0, 1000) * 1000000
  if mode == "large" then counter = 0 end
end

local function ip_of(i)
  return string.format("10.%d.%d.%d", math.floor(i / 65536) % 256, math.floor(i / 256) % 256, i % 256)
end

local function one()
  local i = counter
  counter = counter + 1
  local path
  if mode == "large" then
    local w = 2 + math.floor(i / 10000) % 2
    path = "/nacos/v1/ns/instance?serviceName=bench-large&ip=" .. ip_of(i % 10000) .. "&port=8080&weight=" .. w
  elseif mode == "grow" then
    path = "/nacos/v1/ns/instance?serviceName=bench-grow-" .. (i % 1000) .. "&ip=" .. ip_of(i) .. "&port=8080"
  else
    path = "/nacos/v1/ns/instance?serviceName=bench-fresh-" .. i .. "&ip=10.0.0.1&port=8080"
  end
  return wrk.format("POST", path)
end

function request()
  if depth == 1 then
    return one()
  end
  local batch = {}
  for n = 1, depth do
    batch[n] = one()
  end
  return table.concat(batch)
end
