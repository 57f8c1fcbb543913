-- wrk script for bench/run. Everything is steered by environment variables:
--   BENCH_BODY_FILE   send POST /... with this body (application/json); else GET
--   BENCH_COLD=1      every request asks products.fetch for 5 new identifiers
--   BENCH_ID_PREFIX   how those identifiers begin (default "c"; letters, digits,
--                     "_" "-" "."), so an upstream can tell a group of calls apart
--   BENCH_SHARED_ID   with BENCH_COLD=1: every call's first identifier is this one
--                     (the same in every call, so calls overlap on it), the other
--                     four new as without it (same characters as BENCH_ID_PREFIX)
--   BENCH_STOP_AFTER  stop the thread after this many answers (fixed-count runs)
-- done() prints one line "BENCH_RESULT {json}" with the summary and latency
-- percentiles in microseconds.

local body_file = os.getenv("BENCH_BODY_FILE")
local cold = os.getenv("BENCH_COLD") == "1"
local stop_after = tonumber(os.getenv("BENCH_STOP_AFTER") or "0") or 0

local threads = {}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("tid", thread_count)
  table.insert(threads, thread)
end

wrk.headers["Content-Type"] = "application/json"
if body_file and body_file ~= "" then
  local f = assert(io.open(body_file, "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
else
  wrk.headers["Content-Type"] = nil
end

local counter = 0
local id_prefix = os.getenv("BENCH_ID_PREFIX") or ""
if id_prefix == "" then id_prefix = "c" end
assert(id_prefix:match("^[A-Za-z0-9._-]+$") and #id_prefix <= 64, "BENCH_ID_PREFIX: letters, digits, '.', '_', '-' only")
local prefix = id_prefix
local shared_id = os.getenv("BENCH_SHARED_ID") or ""
assert(shared_id == "" or (shared_id:match("^[A-Za-z0-9._-]+$") and #shared_id <= 128),
  "BENCH_SHARED_ID: 1 to 128 letters, digits, '.', '_', '-'")

function init(args)
  -- A prefix unique to this wrk process and thread, so identifiers never repeat
  -- across runs either: 1 to 128 of A-Z a-z 0-9 . _ - (the contract's rule).
  local seed = os.time() * 1000 + math.floor((os.clock() * 1e6) % 1000) + (tid or 0) * 7919
  math.randomseed(seed)
  prefix = string.format("%s%x%04x%d", id_prefix, os.time() % 0x1000000, math.random(0, 0xffff), tid or 0)
end

if cold then
  function request()
    counter = counter + 1
    local base = prefix .. "_" .. counter .. "_"
    -- The first identifier: new, or the one every call shares.
    local first = shared_id ~= "" and shared_id or (base .. "1")
    local payload = '{"jsonrpc":"2.0","id":' .. counter ..
      ',"method":"products.fetch","params":{"productIdentifiers":["' ..
      first .. '","' .. base .. '2","' .. base .. '3","' .. base .. '4","' .. base .. '5"],"countryCode":"DE"}}'
    return wrk.format("POST", nil, nil, payload)
  end
end

if stop_after > 0 then
  -- Stops this thread, and wakes wrk's main thread (which otherwise sleeps
  -- for the whole -d duration) with the SIGINT it takes as "stop and report".
  -- Use with -t1: each thread counts its own answers.
  local seen = 0
  function response(status, headers, body)
    seen = seen + 1
    if seen == stop_after then
      wrk.thread:stop()
      -- The signal must reach the main thread, so it is sent once this
      -- thread has ended; a few times, until wrk is gone.
      os.execute("(for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; kill -INT $PPID 2>/dev/null || exit 0; done) >/dev/null 2>&1 &")
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"rps":%.1f,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
