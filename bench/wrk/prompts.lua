-- One MCP request per call, revision 2026-07-28 (stateless), so every server under test gets the same
-- load. Arguments after `--`: mode, then
--   targets FILE    prompts/get of random lines of FILE: "path<TAB>name<TAB>arguments-json"
--   zipf FILE S     prompts/get of FILE's lines in a Zipf mix of exponent S: its tenants (paths)
--                   ranked in the order they first appear, a tenant of rank k asked for in
--                   proportion to 1/k^S, and within it its prompts ranked in file order, alike
--   get 1 N peer    prompts/get of a random peer prompt (peer-00000 .. N-1) on the URL's path
--   get 1 N peer-new the same with a new topic each time (no answer given before can be sent again)
--   get 1 N tool    tools/call of a random peer prompt's tool (the same names and arguments)
--   get 1 N tool-new the same with a new topic each time
--   get 1 N skill   resources/read of the SKILL.md of a random peer skill (peer-skill-0000 .. N-1)
--   get 1 N tools-list     tools/list, its first page (N unused)
--   get 1 N resources-list resources/list, its first page (N unused)
--   list CURSOR     prompts/list from CURSOR ("" for the first page)
--   write T N TOKEN admin API: a new version of a random prompt w-000 .. N-1 of tenant T (201)
-- JSON-RPC errors arrive with HTTP 200, so bodies are checked and counted as errors too.
--
-- Paced (an offered load, not a closed loop) when BENCH_RATE_PER_THREAD is set: each wrk thread
-- sends on a fixed schedule at that rate, over as many connections as it holds (-t T -c C: a
-- connection takes the next moment of its thread's schedule when its answer came), and a request's
-- latency is counted from the moment it was scheduled, not from when it could be sent, so time
-- spent queued behind slow answers counts (what a caller on a schedule would see). The moment
-- travels as the request's JSON-RPC id, which the answer carries back: the latency is the request's
-- own whichever connection sent it. Sends are at most 1 ms late (wrk's delay() is in whole
-- milliseconds), which the latencies include. A few threads pace as well as one per connection, and
-- on a small machine take less of the cores the server under test needs.

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *now);
]]
local clock = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, clock)  -- CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000000 + tonumber(clock.tv_nsec) / 1000
end
local interval_us, next_at
local slots = {}  -- the moments this thread scheduled and has not sent yet, earliest first
paced = {}  -- a global: done() reads each thread's latencies (µs from the schedule) with thread:get

local mode, tenants, prompts, names, cursor, targets, tenant, token
local zipf_tenants, zipf_tenant_cdf  -- {path, targets, cdf} per tenant rank; the ranks' CDF
local written = 0
errors = 0  -- a global: done() reads it from each thread with thread:get
local threads = {}
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"},'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}'

-- The cumulative shares of ranks 1..n under a Zipf law of exponent s, and a rank drawn from them.
function zipf_cdf(n, s)
  local cdf, total = {}, 0
  for k = 1, n do
    total = total + 1 / k ^ s
    cdf[k] = total
  end
  for k = 1, n do cdf[k] = cdf[k] / total end
  return cdf
end

local function zipf_rank(cdf)
  local u, low, high = math.random(), 1, #cdf
  while low < high do
    local middle = math.floor((low + high) / 2)
    if cdf[middle] < u then low = middle + 1 else high = middle end
  end
  return low
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  if mode == "targets" then
    targets = {}
    for line in io.lines(args[2]) do
      local path, name, arguments = line:match("([^\t]+)\t([^\t]+)\t(.*)")
      table.insert(targets, {path, name, arguments})
    end
  elseif mode == "zipf" then
    local exponent = tonumber(args[3])
    local by_path = {}
    zipf_tenants = {}
    for line in io.lines(args[2]) do
      local path, name, arguments = line:match("([^\t]+)\t([^\t]+)\t(.*)")
      local group = by_path[path]
      if not group then
        group = {path = path, targets = {}}
        by_path[path] = group
        table.insert(zipf_tenants, group)
      end
      table.insert(group.targets, {path, name, arguments})
    end
    zipf_tenant_cdf = zipf_cdf(#zipf_tenants, exponent)
    for _, group in ipairs(zipf_tenants) do group.cdf = zipf_cdf(#group.targets, exponent) end
  elseif mode == "get" then
    tenants, prompts, names = tonumber(args[2]), tonumber(args[3]), args[4]
  elseif mode == "write" then
    tenant, prompts, token = args[2], tonumber(args[3]), args[4]
  else
    cursor = args[2] or ""
  end
  math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000))
  local rate = tonumber(os.getenv("BENCH_RATE_PER_THREAD") or "")
  if rate and rate > 0 then interval_us = 1000000 / rate end
end

function delay()
  if not interval_us then return 0 end
  local now = now_us()
  if not next_at then next_at = now + math.random() * interval_us end  -- threads spread out
  local scheduled = next_at
  next_at = next_at + interval_us
  table.insert(slots, scheduled)
  if scheduled <= now then return 0 end
  return math.ceil((scheduled - now) / 1000)
end

-- The JSON-RPC id of the request about to be sent: paced, the moment it was scheduled (µs of the
-- monotonic clock; a connection's first request, sent at once, now), else 1.
local function request_id()
  if not interval_us then return "1" end
  local scheduled = table.remove(slots, 1) or now_us()
  return string.format("%d", scheduled)
end

-- One MCP request: the headers naming its method (and its name or URI, if any), and the
-- JSON-RPC envelope with this request's id (request_id), ``fields`` after the _meta in its params.
local function mcp(path, method, name, fields)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2026-07-28",
    ["Mcp-Method"] = method,
    ["Mcp-Name"] = name,  -- nil: no such header
  }
  local body = '{"jsonrpc":"2.0","id":' .. request_id() .. ',"method":"' .. method
    .. '","params":{' .. meta .. fields .. '}}'
  return wrk.format("POST", path, headers, body)
end

local function get_fields(name, arguments)
  return ',"name":"' .. name .. '","arguments":' .. arguments
end

function request()
  if mode == "write" then
    written = written + 1
    local path = string.format("/api/v1/tenants/%s/prompts/w-%03d/versions", tenant,
      math.random(0, prompts - 1))
    local body = '{"messages":[{"role":"user","content":{"type":"text","text":"version '
      .. written .. "-" .. math.random(1, 1000000000) .. '"}}]}'
    return wrk.format("POST", path, {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer " .. token,
    }, body)
  end
  if mode == "targets" or mode == "zipf" then
    local target
    if mode == "zipf" then
      local group = zipf_tenants[zipf_rank(zipf_tenant_cdf)]
      target = group.targets[zipf_rank(group.cdf)]
    else
      target = targets[math.random(1, #targets)]
    end
    return mcp(target[1], "prompts/get", target[2], get_fields(target[2], target[3]))
  end
  if mode == "get" and (names == "tools-list" or names == "resources-list") then
    local method = names == "tools-list" and "tools/list" or "resources/list"
    return mcp(wrk.path, method, nil, "")
  end
  if mode == "get" and names == "skill" then
    local uri = string.format("skill://peer-skill-%04d/SKILL.md", math.random(0, prompts - 1))
    return mcp(wrk.path, "resources/read", uri, ',"uri":"' .. uri .. '"')
  end
  local arguments = '{"topic":"billing"}'
  if names == "peer-new" or names == "tool-new" then
    arguments = '{"topic":"t' .. math.random(1, 1000000000) .. '"}'
  end
  if mode == "get" and (names == "tool" or names == "tool-new") then
    local name = string.format("peer-%05d", math.random(0, prompts - 1))
    return mcp(wrk.path, "tools/call", name, get_fields(name, arguments))
  end
  if mode == "get" then
    if names == "peer" or names == "peer-new" then
      local name = string.format("peer-%05d", math.random(0, prompts - 1))
      return mcp(wrk.path, "prompts/get", name, get_fields(name, arguments))
    end
    local name = string.format("prompt-%06d", math.random(0, prompts - 1))
    local path = string.format("/mcp/bench-%04d", math.random(0, tenants - 1))
    return mcp(path, "prompts/get", name, get_fields(name, arguments))
  end
  local fields = ""
  if cursor ~= "" then fields = ',"cursor":"' .. cursor .. '"' end
  return mcp(wrk.path, "prompts/list", nil, fields)
end

function response(status, headers, body)
  if interval_us then
    local scheduled = tonumber(string.match(body, '"jsonrpc":"2.0","id":(%d+)'))
    if scheduled then table.insert(paced, now_us() - scheduled) end
  end
  if mode == "write" then
    if status ~= 201 then errors = errors + 1 end
    return
  end
  if status ~= 200 or not string.find(body, '"result"', 1, true)
      or string.find(body, '"isError":true', 1, true) then
    errors = errors + 1
  end
end

-- One JSON line with every figure bench/run reads (times in microseconds); nothing else is parsed.
function done(summary, latency, requests)
  local total = 0
  local all = {}
  for _, thread in ipairs(threads) do
    total = total + (thread:get("errors") or 0)
    for _, value in ipairs(thread:get("paced") or {}) do table.insert(all, value) end
  end
  table.sort(all)
  local function at(fraction)
    if #all == 0 then return 0 end
    return all[math.max(1, math.ceil(fraction * #all))]
  end
  local e = summary.errors
  io.write(string.format(
    '{"bench":1,"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,'
      .. '"jsonrpc_errors":%d,"non_2xx":%d,"socket_errors":%d,'
      .. '"paced":%d,"paced_p50_us":%d,"paced_p99_us":%d,"paced_p999_us":%d,"paced_max_us":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, total, e.status, e.connect + e.read + e.write + e.timeout,
    #all, at(0.5), at(0.99), at(0.999), at(1)))
end
