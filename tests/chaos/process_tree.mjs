// What the chaos and soak suites measure of a running `omnirt serve`: its process tree (the
// server and the stage processes it started), their open file descriptors, threads and resident
// memory from /proc, and the shared-memory segments they own in /dev/shm.
import { readdir, readFile, readlink } from 'node:fs/promises';

// Direct and indirect children of `pid` (Linux /proc/<pid>/task/<tid>/children).
export async function descendants(pid) {
    const found = [];
    const queue = [pid];
    while (queue.length > 0) {
        const parent = queue.shift();
        let tasks = [];
        try {
            tasks = await readdir(`/proc/${parent}/task`);
        } catch {
            continue;  // gone
        }
        for (const tid of tasks) {
            let text = '';
            try {
                text = await readFile(`/proc/${parent}/task/${tid}/children`, 'utf8');
            } catch {
                continue;
            }
            for (const child of text.trim().split(/\s+/).filter(Boolean).map(Number)) {
                if (!found.includes(child)) {
                    found.push(child);
                    queue.push(child);
                }
            }
        }
    }
    return found;
}

export async function alive(pid) {
    try {
        const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
        return !/^\d+ \(.*\) Z/.test(stat);  // a zombie is dead
    } catch {
        return false;
    }
}

// {fds, threads, rssKiB} of one process; null when it is gone.
export async function usage(pid) {
    try {
        const [fds, status] = await Promise.all([readdir(`/proc/${pid}/fd`),
                                                 readFile(`/proc/${pid}/status`, 'utf8')]);
        const field = (name) => Number((new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status) ?? [])[1]);
        return { fds: fds.length, threads: field('Threads'), rssKiB: field('VmRSS') };
    } catch {
        return null;
    }
}

// Sums over the server and its stage processes, and the server alone.
export async function treeUsage(serverPid) {
    const pids = [serverPid, ...(await descendants(serverPid))];
    const total = { processes: 0, fds: 0, threads: 0, rssKiB: 0 };
    let server = null;
    for (const pid of pids) {
        const one = await usage(pid);
        if (one === null) continue;
        if (pid === serverPid) server = one;
        total.processes += 1;
        total.fds += one.fds;
        total.threads += one.threads;
        total.rssKiB += one.rssKiB;
    }
    return { pids, total, server };
}

// /dev/shm segments of omnirt's shm relay created by any of `pids`
// ("omnirt.<instance>.<pid>.<relay>.<serial>", src/relay/shm/segment.cpp).
export async function shmSegmentsOf(pids) {
    const wanted = new Set(pids.map(String));
    let files = [];
    try {
        files = await readdir('/dev/shm');
    } catch {
        return [];
    }
    return files.filter((file) => {
        const parts = file.split('.');
        return parts[0] === 'omnirt' && parts.length >= 5 && wanted.has(parts[parts.length - 3]);
    });
}

// The executable of a pid (to tell the server's stage processes from anything else).
export async function executable(pid) {
    try {
        return await readlink(`/proc/${pid}/exe`);
    } catch {
        return null;
    }
}

// Stops `server` (SIGTERM; it must exit 0) and reports, through `fail`, a failed shutdown and
// any of `pids` still alive afterwards.
export async function stopAndCheckGone(server, pids, fail) {
    try {
        await server.stop();
    } catch (error) {
        fail(`shutdown: ${error.message.split('\n')[0]}`);
    }
    const survivors = [];
    for (const pid of pids) if (await alive(pid)) survivors.push(pid);
    if (survivors.length > 0) fail(`processes left after shutdown: ${survivors.join(', ')}`);
}
