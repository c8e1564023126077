// The soak suite (issue 21): `omnirt serve --demo` under a steady mix of chat, streamed chat,
// chat with audio and speech requests (some clients disconnect, some read slowly) for a long
// time, sampling every 10 s the resident memory, file descriptors and threads of the server and
// of its whole process tree. It passes when no request was lost (tests/chaos/load.mjs) and, after
// the warm-up, the server's and the tree's resident memory and descriptors grew by less than 5%
// (last minute's mean against the first minute's after warm-up).
//
//   node tests/chaos/soak.mjs [--minutes 20] [--rate 20] [--concurrency 8] [--warmup-s 120]
//                             [--sample-s 10] [--out DIR] [--seed 1]
//
// Writes DIR/soak.csv (one row per sample), DIR/soak.json (the summary) and, with python3 and
// PIL ($PYTHON, default /usr/bin/python3: Debian python3-pil), DIR/soak.png (tests/chaos/plot.py).
// Exit 0 when every check passed.
import { mkdir, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';

import { repoRoot, startServer } from '../e2e/server.mjs';
import { kKinds, runRequest, seededRandom } from './load.mjs';
import { descendants, treeUsage } from './process_tree.mjs';

const { values: options } = parseArgs({
    options: {
        minutes: { type: 'string', default: '20' },
        rate: { type: 'string', default: '20' },
        concurrency: { type: 'string', default: '8' },
        'warmup-s': { type: 'string', default: '120' },
        'sample-s': { type: 'string', default: '10' },
        out: { type: 'string', default: 'soak-out' },
        seed: { type: 'string', default: '1' },
    },
});
const durationMs = Number(options.minutes) * 60_000;
const rate = Number(options.rate);
const concurrency = Number(options.concurrency);
const warmupMs = Number(options['warmup-s']) * 1000;
const sampleMs = Number(options['sample-s']) * 1000;
const random = seededRandom(Number(options.seed));
await mkdir(options.out, { recursive: true });

const server = await startServer({ stopTimeoutMs: 60_000 });
const serverPid = server.proc.pid;
const origin = server.origin;
const start = Date.now();
const counts = {};
const lost = [];
let inFlight = 0;

// Arrivals at `rate` per second (exponential gaps), at most `concurrency` at once (an arrival
// that finds them all busy waits: the offered load is steady, the server is never flooded).
const arrivals = (async () => {
    const running = new Set();
    while (Date.now() - start < durationMs) {
        await delay(-Math.log(1 - random()) * 1000 / rate);
        while (running.size >= concurrency) await Promise.race(running);
        const kind = kKinds[Math.floor(random() * kKinds.length)];
        inFlight += 1;
        const request = runRequest(origin, kind, random).then((result) => {
            counts[result.outcome] = (counts[result.outcome] ?? 0) + 1;
            if (result.outcome === 'lost' && lost.length < 10) lost.push(result);
        }).finally(() => {
            inFlight -= 1;
            running.delete(request);
        });
        running.add(request);
    }
    await Promise.all(running);
})();

const samples = [];
const sampler = (async () => {
    while (Date.now() - start < durationMs) {
        const usage = await treeUsage(serverPid);
        samples.push({
            t_s: (Date.now() - start) / 1000,
            server_rss_mib: usage.server.rssKiB / 1024, tree_rss_mib: usage.total.rssKiB / 1024,
            server_fds: usage.server.fds, tree_fds: usage.total.fds,
            server_threads: usage.server.threads, tree_threads: usage.total.threads,
            processes: usage.total.processes, in_flight: inFlight,
            requests: Object.values(counts).reduce((a, b) => a + b, 0),
        });
        const last = samples[samples.length - 1];
        console.log(`t=${last.t_s.toFixed(0)}s rss server ${last.server_rss_mib.toFixed(1)} MiB, ` +
                    `tree ${last.tree_rss_mib.toFixed(1)} MiB; fds ${last.server_fds}/${last.tree_fds}; ` +
                    `threads ${last.server_threads}/${last.tree_threads}; requests ${last.requests}`);
        await delay(sampleMs);
    }
})();
await Promise.all([arrivals, sampler]);
const processesSeen = [serverPid, ...(await descendants(serverPid))].length;
let shutdown = 'exit 0';
try {
    await server.stop();
} catch (error) {
    shutdown = error.message.split('\n')[0];
}

// Growth after warm-up: the mean of the last minute against the mean of the first minute after
// the warm-up.
const window = Math.max(1, Math.round(60_000 / sampleMs));
const steady = samples.filter((s) => s.t_s * 1000 >= warmupMs);
const mean = (rows, key) => rows.reduce((a, r) => a + r[key], 0) / rows.length;
const growth = {};
const failures = [];
if (steady.length < 2 * window) {
    failures.push(`too few samples after the warm-up (${steady.length}; need ${2 * window})`);
} else {
    for (const key of ['server_rss_mib', 'tree_rss_mib', 'server_fds', 'tree_fds']) {
        const first = mean(steady.slice(0, window), key);
        const last = mean(steady.slice(-window), key);
        growth[key] = (last - first) / first;
        if (growth[key] >= 0.05) {
            failures.push(`${key} grew ${(100 * growth[key]).toFixed(1)}% after the warm-up ` +
                          `(${first.toFixed(1)} -> ${last.toFixed(1)})`);
        }
    }
}
if ((counts.lost ?? 0) > 0) {
    failures.push(`${counts.lost} requests lost: ${lost.map((r) => `${r.kind}: ${r.why}`).join(' | ')}`);
}
if (shutdown !== 'exit 0') failures.push(`shutdown: ${shutdown}`);

const columns = Object.keys(samples[0] ?? {});
await writeFile(path.join(options.out, 'soak.csv'),
                [columns.join(','), ...samples.map((s) => columns.map((c) => s[c]).join(','))].join('\n') + '\n');
const summary = {
    minutes: Number(options.minutes), rate, concurrency, warmup_s: warmupMs / 1000,
    sample_s: sampleMs / 1000, counts, growth, processes_seen: processesSeen, shutdown, failures,
};
await writeFile(path.join(options.out, 'soak.json'), JSON.stringify(summary, null, 1));
const plot = spawnSync(process.env.PYTHON ?? '/usr/bin/python3', [path.join(repoRoot, 'tests/chaos/plot.py'),
                                   path.join(options.out, 'soak.csv'),
                                   path.join(options.out, 'soak.png'), String(warmupMs / 1000)],
                       { stdio: 'inherit' });
if (plot.status !== 0) console.error('soak: no plot (python3 with PIL is needed for soak.png)');
console.log(JSON.stringify(summary, null, 1));
for (const failure of failures) console.error(`FAIL: ${failure}`);
process.exit(failures.length === 0 ? 0 : 1);
