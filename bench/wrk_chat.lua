-- wrk script: non-streaming chat completions against `omnirt serve` (the demo pipeline).
--   wrk -t2 -c64 -d20s --latency -s bench/wrk_chat.lua http://127.0.0.1:8000/v1/chat/completions
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"demo","messages":[{"role":"user","content":"hello there"}],"max_tokens":8}'

local failures = 0
function response(status, headers, body)
    if status ~= 200 then failures = failures + 1 end
end

function done(summary, latency, requests)
    io.write(string.format("non-2xx: %d\n", summary.errors.status))
end
