-- wrk script: POST /embed (or /v1/embeddings) with TEXTS texts per request,
-- drawn in turn from a file of JSON string literals, one per line
-- (bench/serve/run.sh writes it from the fortunes). Each wrk thread starts at
-- a different offset.
--   wrk -s embed_requests.lua ... -- TEXTS_FILE TEXTS_PER_REQUEST [openai [PATH]]
-- openai: OpenAI's body ({"input": [...]}) to /v1/embeddings, or to PATH
-- (infinity-emb serves it at /embeddings).

local texts = {}
local per_request = 1
local openai = false
local counter = 0

function init(args)
  for line in io.lines(args[1]) do texts[#texts + 1] = line end
  per_request = tonumber(args[2] or "1")
  openai = args[3] == "openai"
  counter = math.random(#texts)
  wrk.method = "POST"
  wrk.path = args[4] or (openai and "/v1/embeddings" or "/embed")
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local picked = {}
  for i = 1, per_request do
    counter = counter % #texts + 1
    picked[i] = texts[counter]
  end
  local field = openai and "input" or "inputs"
  return wrk.format(nil, nil, nil, '{"' .. field .. '":[' .. table.concat(picked, ",") .. ']}')
end

local errors = 0
function response(status, headers, body)
  if status ~= 200 then errors = errors + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("RESULT requests=%d errors_non2xx=%d seconds=%.3f p50_ms=%.2f p99_ms=%.2f\n",
    summary.requests, summary.errors.status, summary.duration / 1e6,
    latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
