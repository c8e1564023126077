// The chaos suite (issue 21): `omnirt serve --demo` under steady load while stage processes are
// killed (SIGKILL) or frozen (SIGSTOP, then SIGCONT), killed while a streamed request's payloads
// move between them (a relay peer gone mid-transfer), clients disconnect mid-stream and read
// slowly (a full /dev/shm: tests/chaos/shm_full.mjs). Then it checks what must hold whatever happened:
//
//   - no request lost: each ended with its full answer, an error the client can read, or the
//     client's own disconnect (tests/chaos/load.mjs);
//   - the pipeline heals: /health returns to "ok" (the supervisor restarts killed processes,
//     docs/pipeline.md) and new requests are answered correctly;
//   - nothing leaks: after the load, the server's file descriptors and threads are back within
//     a small margin of the warmed-up baseline; no stage with a KV cache (the AR engine) has a
//     block held by a request (omnirt_stage_kv_blocks_used 0; the demo pipeline has no KV cache,
//     so the report's kv_stages says how many stages the check covered); after SIGTERM the server exits 0, every process
//     of its tree is gone and no shared-memory segment of theirs is left in /dev/shm.
//
//   node tests/chaos/chaos.mjs [--seconds 40] [--concurrency 6] [--fault-every-ms 4000]
//                              [--seed 1] [--pipeline demo|default] [--json FILE]
//
// --pipeline default runs the model pipeline `omnirt serve` starts without arguments (Qwen3-Omni
// with speech on its tiny checkpoint, generated into a private cache: AR engines with KV caches,
// so the KV check covers the thinker and the talker) with greedy requests (tests/chaos/load.mjs).
//
// Exit 0 when every check passed, 1 otherwise (each failure printed). Timeouts are hang guards.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';

import { startServer } from '../e2e/server.mjs';
import { health, waitHealthy, waitKvFree } from './health.mjs';
import { demoTarget, modelTarget, runRequest as runOne, seededRandom } from './load.mjs';
import { descendants, shmSegmentsOf, stopAndCheckGone, treeUsage } from './process_tree.mjs';

const { values: options } = parseArgs({
    options: {
        seconds: { type: 'string', default: '40' },
        concurrency: { type: 'string', default: '6' },
        'fault-every-ms': { type: 'string', default: '4000' },
        seed: { type: 'string', default: '1' },
        json: { type: 'string' },
        'heal-timeout-s': { type: 'string', default: '60' },
        pipeline: { type: 'string', default: 'demo' },
    },
});
if (!['demo', 'default'].includes(options.pipeline)) {
    console.error(`--pipeline is demo or default, not '${options.pipeline}'`);
    process.exit(2);
}
const seconds = Number(options.seconds);
const concurrency = Number(options.concurrency);
const faultEveryMs = Number(options['fault-every-ms']);
const random = seededRandom(Number(options.seed));
const failures = [];
const fail = (what) => {
    failures.push(what);
    console.error(`FAIL: ${what}`);
};

// A restart budget that the faults of a long run cannot spend (the budget itself is tested in
// tests/runner), and short back-offs so that the pipeline heals between faults.
const cacheDir = options.pipeline === 'default'
    ? await mkdtemp(path.join(os.tmpdir(), 'omnirt-chaos-')) : null;
const server = await startServer({
    stopTimeoutMs: 60_000,
    pipeline: options.pipeline,
    startTimeoutMs: options.pipeline === 'default' ? 180_000 : 60_000,
    env: cacheDir ? { OMNIRT_CACHE_DIR: cacheDir } : {},
    args: ['--set', 'restart.max_restarts=1000', '--set', 'restart.window_s=60',
           '--set', 'restart.backoff_initial_ms=100', '--set', 'restart.backoff_max_ms=1000'],
});
const serverPid = server.proc.pid;
if (!serverPid) throw new Error('tests/e2e/server.mjs gave no server pid');
const origin = server.origin;
// The model pipeline's id is its config's; ask it.
const target = options.pipeline === 'demo'
    ? demoTarget : modelTarget((await (await fetch(`${origin}/v1/models`)).json()).data?.[0]?.id);
const runRequest = (where, kind, generator, extra = {}) =>
    runOne(where, kind, generator, { target, ...extra });
const seenPids = new Set([serverPid]);
const remember = async () => {
    for (const pid of await descendants(serverPid)) seenPids.add(pid);
};

// Warm-up: each kind once, then the baseline.
for (const kind of target.kinds) {
    const result = await runRequest(origin, kind, random);
    if (result.outcome === 'lost' || result.outcome === 'error') {
        fail(`warm-up ${kind}: ${result.outcome} ${result.why ?? result.message}`);
    }
}
await remember();
const baseline = await treeUsage(serverPid);
console.log(`baseline: server fds ${baseline.server.fds}, threads ${baseline.server.threads}, ` +
            `rss ${(baseline.server.rssKiB / 1024).toFixed(1)} MiB; ${baseline.pids.length} processes`);

// Load and faults.
const counts = {};
const lostSamples = [];
const faults = [];
const endAt = Date.now() + seconds * 1000;
const workers = Array.from({ length: concurrency }, async () => {
    while (Date.now() < endAt) {
        const kind = target.kinds[Math.floor(random() * target.kinds.length)];
        const result = await runRequest(origin, kind, random);
        const key = `${result.outcome}`;
        counts[key] = (counts[key] ?? 0) + 1;
        counts[`${kind}.${result.outcome}`] = (counts[`${kind}.${result.outcome}`] ?? 0) + 1;
        if (result.outcome === 'lost' && lostSamples.length < 10) lostSamples.push(result);
        if (result.outcome === 'error') await delay(20);  // fail-fast errors: do not spin
    }
});
const injector = (async () => {
    while (Date.now() + faultEveryMs < endAt) {
        await delay(faultEveryMs * (0.5 + random()));
        await remember();
        const stages = (await descendants(serverPid)).filter((pid) => pid !== serverPid);
        if (stages.length === 0) continue;
        const pid = stages[Math.floor(random() * stages.length)];
        if (random() < 0.25) {
            // A relay peer gone mid-transfer: a stage process killed at the first audio chunk of
            // a streamed audio chat, while its payloads are moving between the stages.
            let fault = 'SIGKILL mid-transfer: no audio came';
            const result = await runRequest(origin, 'chat_audio_stream', random, {
                tokenDelayMs: 100,
                onAudio: () => {
                    try {
                        process.kill(pid, 'SIGKILL');
                        fault = 'SIGKILL mid-transfer';
                    } catch (error) {
                        fault = `SIGKILL mid-transfer failed: ${error.code}`;
                    }
                },
            });
            faults.push({ at: Date.now(), pid, fault });
            counts[`mid_transfer.${result.outcome}`] = (counts[`mid_transfer.${result.outcome}`] ?? 0) + 1;
            if (result.outcome === 'lost') {
                counts.lost = (counts.lost ?? 0) + 1;
                if (lostSamples.length < 10) lostSamples.push(result);
            }
            continue;
        }
        const freeze = random() < 0.4;
        try {
            if (freeze) {
                process.kill(pid, 'SIGSTOP');
                faults.push({ at: Date.now(), pid, fault: 'SIGSTOP 1.5 s' });
                await delay(1500);
                process.kill(pid, 'SIGCONT');
            } else {
                process.kill(pid, 'SIGKILL');
                faults.push({ at: Date.now(), pid, fault: 'SIGKILL' });
            }
        } catch (error) {
            faults.push({ at: Date.now(), pid, fault: `${freeze ? 'SIGSTOP' : 'SIGKILL'} failed: ${error.code}` });
        }
    }
})();
await Promise.all([...workers, injector]);
await remember();

if ((counts.lost ?? 0) > 0) {
    fail(`${counts.lost} requests lost; first: ${lostSamples.map((r) => `${r.kind}: ${r.why}`).join(' | ')}`);
}
if ((counts.ok ?? 0) === 0) fail('no request succeeded under load');

// Healing.
const healStart = Date.now();
const healed = await waitHealthy(origin, Number(options['heal-timeout-s']) * 1000);
const healMs = Date.now() - healStart;
if (!healed.ok) {
    fail(`the pipeline did not return to health within ${options['heal-timeout-s']} s: ` +
         JSON.stringify(healed.last?.body).slice(0, 600));
} else {
    for (const kind of target.kinds.filter((k) => k !== 'disconnect')) {
        const result = await runRequest(origin, kind, random);
        if (result.outcome !== 'ok') fail(`after healing, ${kind}: ${result.outcome} ${result.why ?? result.message}`);
    }
}
await remember();

// Leaks while running: the server's descriptors and threads against the baseline (a margin for
// the restarted processes' pipes and lazily started pools).
const after = await treeUsage(serverPid);
const fdMargin = 16;
const threadMargin = 8;
if (after.server.fds > baseline.server.fds + fdMargin) {
    fail(`server file descriptors ${baseline.server.fds} -> ${after.server.fds}`);
}
if (after.server.threads > baseline.server.threads + threadMargin) {
    fail(`server threads ${baseline.server.threads} -> ${after.server.threads}`);
}

// KV blocks: every request ended, so none may still hold one.
const kv = await waitKvFree(origin, 30_000);
if (!kv.ok) fail(`KV blocks still held by requests after the run: ${JSON.stringify(kv.last)}`);

// Shutdown: exit 0, no process left, no segment left.
await stopAndCheckGone(server, seenPids, fail);
const segments = await shmSegmentsOf([...seenPids]);
if (segments.length > 0) fail(`shared-memory segments left: ${segments.join(', ')}`);
if (cacheDir) await rm(cacheDir, { recursive: true, force: true });

const report = {
    pipeline: options.pipeline, seconds, concurrency, seed: Number(options.seed), counts, faults: faults.length,
    sigkill: faults.filter((f) => f.fault === 'SIGKILL').length,
    sigstop: faults.filter((f) => f.fault.startsWith('SIGSTOP 1.5')).length,
    sigkill_mid_transfer: faults.filter((f) => f.fault === 'SIGKILL mid-transfer').length,
    heal_ms: healed.ok ? healMs : null,
    baseline: baseline.server, after: after.server, processes_seen: seenPids.size,
    kv_stages: Object.keys(kv.last ?? {}).length,
    failures,
};
console.log(JSON.stringify(report, null, 1));
if (options.json) await writeFile(options.json, JSON.stringify(report, null, 1));
process.exit(failures.length === 0 ? 0 : 1);
