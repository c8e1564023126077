// Holds N concurrent SSE chat streams against `omnirt serve` and reports the server's memory.
//   node bench/sse_hold.mjs --url http://127.0.0.1:8000 --streams 1000 --pid SERVER_PID
// Each stream asks the demo thinker for a slow reply (token_delay_ms), so streams stay open;
// once every stream has its first event, VmRSS / VmHWM of the server process (and the sum over
// its child stage processes) are read from /proc, then every stream is cancelled.
import { readFileSync, readdirSync } from "node:fs";
import http from "node:http";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (i % 2 ? pairs : [...pairs, [arg.replace(/^--/, ""), all[i + 1]]]), []),
);
const url = new URL(args.url ?? "http://127.0.0.1:8000");
const streams = Number(args.streams ?? 1000);
const pid = Number(args.pid);

function kib(pidToRead, field) {
  const status = readFileSync(`/proc/${pidToRead}/status`, "utf8");
  const line = status.split("\n").find((l) => l.startsWith(field + ":"));
  return line ? Number(line.split(/\s+/)[1]) : 0;
}
function children(parent) {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1].split(" ")[1] === String(parent);
      } catch {
        return false;
      }
    })
    .map(Number);
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const body = JSON.stringify({
  model: "demo",
  stream: true,
  messages: [{ role: "user", content: "word ".repeat(40) }],
  stage_params: { thinker: { token_delay_ms: 5000 } },
});
const requests = [];
let firstEvents = 0;
const started = Date.now();
await new Promise((resolve, reject) => {
  for (let i = 0; i < streams; ++i) {
    const req = http.request(
      { host: url.hostname, port: url.port, path: "/v1/chat/completions", method: "POST", agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`stream ${i}: HTTP ${res.statusCode}`));
        let seen = false;
        res.on("data", () => {
          if (!seen) {
            seen = true;
            if (++firstEvents === streams) resolve();
          }
        });
        res.on("error", () => {});
      },
    );
    req.on("error", (e) => reject(e));
    req.end(body);
    requests.push(req);
  }
});
const held = Date.now() - started;
const rss = kib(pid, "VmRSS");
const hwm = kib(pid, "VmHWM");
const childPids = children(pid);
const childRss = childPids.reduce((sum, c) => sum + kib(c, "VmRSS"), 0);
console.log(JSON.stringify({ streams, all_open_after_ms: held, server_rss_mib: +(rss / 1024).toFixed(1),
  server_peak_rss_mib: +(hwm / 1024).toFixed(1), stage_processes: childPids.length,
  stage_processes_rss_mib: +(childRss / 1024).toFixed(1) }));
for (const req of requests) req.destroy();
agent.destroy();
