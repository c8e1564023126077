// Chaos with a full /dev/shm (issue 21): `omnirt serve --demo` runs in a private mount namespace
// whose /dev/shm is a small tmpfs of its own (unshare + mount; root only: without it the script
// prints SKIP and exits 77), so filling it touches nothing else on the host. Then:
//
//   1. warm-up (each request kind once) and a baseline of the namespace's segments;
//   2. /dev/shm is filled to the last byte; requests go on (each must end ok or with an error
//      the client can read, none lost), and a random stage process is killed: its
//      restarts cannot create their relay pools (posix_fallocate fails: an error, not a SIGBUS)
//      and must fail cleanly, within the restart budget, while the server stays up;
//   3. the fill is removed: the pipeline must heal (/health "ok") and answer every kind
//      correctly again;
//   4. no leak: the namespace's segments are back to the baseline count, the server exits 0 on
//      SIGTERM and none of its processes is left.
//
//   node tests/chaos/shm_full.mjs [--shm-mib 1024] [--full-seconds 4] [--seed 1] [--json FILE]
//
// Exit 0 when every check passed, 1 otherwise (each failure printed), 77 when skipped.
import { spawnSync } from 'node:child_process';
import { open, readdir, statfs, unlink, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

import { startServer } from '../e2e/server.mjs';
import { health, waitHealthy } from './health.mjs';
import { kKinds, runRequest, seededRandom } from './load.mjs';
import { alive, descendants, stopAndCheckGone } from './process_tree.mjs';

const { values: options } = parseArgs({
    options: {
        'shm-mib': { type: 'string', default: '1024' },
        'full-seconds': { type: 'string', default: '4' },
        seed: { type: 'string', default: '1' },
        json: { type: 'string' },
        'heal-timeout-s': { type: 'string', default: '60' },
    },
});
const shmMiB = Number(options['shm-mib']);
const fullSeconds = Number(options['full-seconds']);
const random = seededRandom(Number(options.seed));
const failures = [];
const fail = (what) => {
    failures.push(what);
    console.error(`FAIL: ${what}`);
};

// A private tmpfs on /dev/shm needs root and mount namespaces.
const kMountShm = 'mount -t tmpfs -o size="$OMNIRT_CHAOS_SHM" omnirt-chaos /dev/shm && exec "$0" "$@"';
const kUnshare = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', kMountShm];
if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    console.log('SKIP: needs root (a private tmpfs on /dev/shm in a mount namespace)');
    process.exit(77);
}
const probe = spawnSync(kUnshare[0], [...kUnshare.slice(1), 'true'],
                        { env: { ...process.env, OMNIRT_CHAOS_SHM: '1m' }, encoding: 'utf8' });
if (probe.status !== 0) {
    console.log(`SKIP: cannot mount a private /dev/shm (${(probe.stderr || probe.error?.message || '').trim()})`);
    process.exit(77);
}

// Restarts that the full /dev/shm makes fail must not spend the budget of this run.
const server = await startServer({
    wrapper: kUnshare,
    env: { OMNIRT_CHAOS_SHM: `${shmMiB}m` },
    stopTimeoutMs: 60_000,
    args: ['--set', 'restart.max_restarts=1000', '--set', 'restart.window_s=60',
           '--set', 'restart.backoff_initial_ms=100', '--set', 'restart.backoff_max_ms=500'],
});
const serverPid = server.proc.pid;
const origin = server.origin;
// The namespace's /dev/shm as seen from here.
const shmDir = `/proc/${serverPid}/root/dev/shm`;
const segments = async () => (await readdir(shmDir)).filter((name) => name.startsWith('omnirt.'));
const seenPids = new Set([serverPid]);
const remember = async () => {
    for (const pid of await descendants(serverPid)) seenPids.add(pid);
};

const counts = {};
const count = (phase, result) => {
    const key = `${phase}.${result.outcome}`;
    counts[key] = (counts[key] ?? 0) + 1;
    if (result.outcome === 'lost') fail(`${phase} ${result.kind}: lost (${result.why})`);
};

// 1. Warm-up and baseline.
for (const kind of kKinds) {
    const result = await runRequest(origin, kind, random);
    count('warm-up', result);
    if (result.outcome === 'error') fail(`warm-up ${kind}: ${result.message}`);
}
await remember();
const baselineSegments = (await segments()).length;
const space = await statfs(shmDir);
console.log(`private /dev/shm: ${shmMiB} MiB, ${baselineSegments} segments after warm-up, ` +
            `${((space.bavail * space.bsize) / 2 ** 20).toFixed(1)} MiB free`);

// 2. Fill it, load, kill a stage process.
const fillPath = `${shmDir}/chaos-fill`;
const fill = await open(fillPath, 'w');
const chunk = Buffer.alloc(1 << 20, 0x5a);
let filled = 0;
for (let piece = chunk; piece.length >= 4096;) {
    try {
        await fill.write(piece);
        filled += piece.length;
    } catch (error) {
        if (error.code !== 'ENOSPC') throw error;
        piece = piece.subarray(0, piece.length / 2);
    }
}
await fill.close();
const left = await statfs(shmDir);
console.log(`filled ${(filled / 2 ** 20).toFixed(1)} MiB; ${left.bavail * left.bsize} bytes left`);
if (left.bavail * left.bsize > 64 * 1024) fail(`/dev/shm not full: ${left.bavail * left.bsize} bytes left`);

const stages = (await descendants(serverPid)).filter((pid) => pid !== serverPid);
if (stages.length === 0) fail('no stage process to kill');
const victim = stages[Math.floor(random() * stages.length)];
const endAt = Date.now() + fullSeconds * 1000;
let killed = false;
let sawUnhealthy = false;
while (Date.now() < endAt) {
    const kind = kKinds[Math.floor(random() * kKinds.length)];
    count('full', await runRequest(origin, kind, random));
    if (!killed && Date.now() > endAt - (fullSeconds * 1000) / 2) {
        await remember();
        process.kill(victim, 'SIGKILL');
        killed = true;
    }
    if (killed && (await health(origin)).body.status !== 'ok') sawUnhealthy = true;
}
await remember();
if (!(await alive(serverPid))) fail('the server died while /dev/shm was full');
if (!sawUnhealthy) fail('health never left "ok" after a stage was killed with /dev/shm full');

// 3. Free it and heal.
await unlink(fillPath);
const healStart = Date.now();
const healed = await waitHealthy(origin, Number(options['heal-timeout-s']) * 1000);
const healMs = Date.now() - healStart;
if (!healed.ok) {
    fail(`no return to health within ${options['heal-timeout-s']} s of freeing /dev/shm: ` +
         JSON.stringify(healed.last?.body).slice(0, 600));
} else {
    for (const kind of kKinds.filter((k) => k !== 'disconnect')) {
        const result = await runRequest(origin, kind, random);
        count('healed', result);
        if (result.outcome !== 'ok') fail(`after healing, ${kind}: ${result.outcome} ${result.why ?? result.message}`);
    }
}
await remember();

// 4. Leaks: segments back to the baseline (the killed process's pool was unlinked by its
// successor's stale-segment sweep), clean exit, no process left.
const afterSegments = await segments();
if (afterSegments.length > baselineSegments) {
    fail(`segments ${baselineSegments} -> ${afterSegments.length}: ${afterSegments.join(', ')}`);
}
await stopAndCheckGone(server, seenPids, fail);

const report = {
    shm_mib: shmMiB, filled_mib: filled / 2 ** 20, full_seconds: fullSeconds,
    seed: Number(options.seed), counts, killed: victim, heal_ms: healed.ok ? healMs : null,
    segments: { baseline: baselineSegments, after: afterSegments.length },
    processes_seen: seenPids.size, failures,
};
console.log(JSON.stringify(report, null, 1));
if (options.json) await writeFile(options.json, JSON.stringify(report, null, 1));
process.exit(failures.length === 0 ? 0 : 1);
