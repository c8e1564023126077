// How long a killed stage process takes to be healthy again (issue 21's target: <= 3 s for
// non-model stages, <= load time + 3 s for model stages). A benchmark, not a test: it starts
// `omnirt serve` (the demo pipeline, or with --pipeline default the model pipeline `omnirt
// serve` runs without arguments) with the default back-off, kills each
// stage process in turn with SIGKILL, and measures from the kill to the first /health that says
// "ok" again (polled every 10 ms), then checks that a request is answered.
//
//   node tests/chaos/restart_time.mjs [--pipeline demo|default] [--rounds 3] [--json FILE]
//
// Prints one line per kill and the p50 / max per process; exit 1 when a restart never came back
// (60 s guard) or a request after it failed.
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';

import { startServer } from '../e2e/server.mjs';
import { health } from './health.mjs';
import { descendants } from './process_tree.mjs';

const { values: options } = parseArgs({
    options: {
        pipeline: { type: 'string', default: 'demo' },
        rounds: { type: 'string', default: '3' },
        json: { type: 'string' },
    },
});
const rounds = Number(options.rounds);
if (!['demo', 'default'].includes(options.pipeline) || !(rounds >= 1 && rounds <= 100)) {
    console.error('usage: restart_time.mjs [--pipeline demo|default] [--rounds 1..100] [--json FILE]');
    process.exit(2);
}

// The process name of a stage process ("--process NAME" on its command line).
async function processName(pid) {
    try {
        const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
        const at = argv.indexOf('--process');
        return at >= 0 ? argv[at + 1] : `pid ${pid}`;
    } catch {
        return null;
    }
}

async function answered(origin) {
    // The default pipeline's model name is its config's (README: qwen3-omni-speech); ask it.
    const listed = await (await fetch(`${origin}/v1/models`)).json();
    const model = listed.data?.[0]?.id;
    const response = await fetch(`${origin}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model, max_tokens: 4,
                               messages: [{ role: 'user', content: 'hello there' }] }),
        signal: AbortSignal.timeout(60_000),
    });
    return response.ok;
}

// The default back-off (500 ms before a first restart), a budget the rounds cannot spend, and a
// window of 2 s so that, with the pause between kills below, every kill is a first restart (the
// back-off doubles for each earlier restart within the window; docs/config.md "Restart").
const kWindowS = 2;
const startedAt = performance.now();
const server = await startServer({
    pipeline: options.pipeline,
    stopTimeoutMs: 60_000,
    args: ['--set', 'restart.max_restarts=1000', '--set', `restart.window_s=${kWindowS}`],
});
// The server's own start (every stage process started and loaded, in parallel): what a model
// stage's restart is compared with.
const startMs = performance.now() - startedAt;
console.log(`server started in ${startMs.toFixed(0)} ms`);
const failures = [];
const samples = {};
try {
    if (!(await answered(server.origin))) failures.push('the first request failed');
    for (let round = 0; round < rounds; ++round) {
        const stages = (await descendants(server.proc.pid)).filter((pid) => pid !== server.proc.pid);
        for (const pid of stages) {
            const name = await processName(pid);
            if (name === null) continue;
            // The previous restart out of the window: this one is a first restart.
            await delay(kWindowS * 1000 + 200);
            const killedAt = performance.now();
            process.kill(pid, 'SIGKILL');
            // Wait until health has noticed the death, then until it is ok again.
            let sawDown = false;
            let healthyMs = null;
            while (performance.now() - killedAt < 60_000) {
                const status = (await health(server.origin)).body.status;
                if (status !== 'ok') sawDown = true;
                if (sawDown && status === 'ok') {
                    healthyMs = performance.now() - killedAt;
                    break;
                }
                await delay(10);  // polling a state for a measurement
            }
            if (healthyMs === null) {
                failures.push(`${name}: not healthy within 60 s of SIGKILL`);
                continue;
            }
            const ok = await answered(server.origin);
            if (!ok) failures.push(`${name}: a request after its restart failed`);
            (samples[name] ??= []).push(healthyMs);
            console.log(`round ${round + 1}: ${name} killed -> healthy in ${healthyMs.toFixed(0)} ms` +
                        `${ok ? '' : ' (then a request FAILED)'}`);
        }
    }
} finally {
    await server.stop();
}
const summary = {};
for (const [name, values] of Object.entries(samples)) {
    const sorted = [...values].sort((a, b) => a - b);
    summary[name] = { p50_ms: Math.round(sorted[Math.floor(sorted.length / 2)]),
                      max_ms: Math.round(sorted[sorted.length - 1]), kills: sorted.length };
    console.log(`${name}: p50 ${summary[name].p50_ms} ms, max ${summary[name].max_ms} ms over ` +
                `${sorted.length} kills`);
}
for (const failure of failures) console.error(`FAIL: ${failure}`);
if (options.json) {
    await writeFile(options.json, JSON.stringify({ pipeline: options.pipeline, start_ms: Math.round(startMs), summary, failures }, null, 1));
}
process.exit(failures.length === 0 ? 0 : 1);
