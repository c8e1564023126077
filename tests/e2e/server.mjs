// Starts the real `omnirt serve` for black-box tests.
//
//   const server = await startServer({ args: ['--api-key', 'k'] });
//   ... server.baseURL (http://127.0.0.1:PORT/v1, for the openai client), server.origin ...
//   await server.stop();   // SIGTERM, waits for the exit, throws unless it exited 0
//
// The binary is $OMNIRT_BIN, or build/bin/omnirt under the repository root. Every server listens
// on a port the OS picks (--port 0), so test files can run in parallel. A server still running
// when the test process exits is killed (SIGKILL), so a failing file leaves nothing behind.
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export function omnirtBinary() {
    return process.env.OMNIRT_BIN || path.join(repoRoot, 'build', 'bin', 'omnirt');
}

const kListeningLine = /^omnirt serve: listening on http:\/\/([^\s:]+|\[[^\]]+\]):(\d+)\s*$/;
const kStderrKeepBytes = 64 * 1024;

const live = new Set();
process.on('exit', () => {
    for (const proc of live) {
        try {
            proc.kill('SIGKILL');
        } catch {
            // already gone
        }
    }
});

// Resolves once the server printed its listening line; rejects when it exits first or does not
// get there within `startTimeoutMs` (it is then killed).
//   args: extra `omnirt serve` arguments (--port and --host are set here).
//   pipeline: 'demo' (default) adds --demo unless args name a --config; 'default' serves what
//     `omnirt serve` runs without arguments (Qwen3 chat on the generated tiny checkpoint).
//   stopTimeoutMs: how long stop() waits after SIGTERM before it kills the server and fails.
//   wrapper: a command that runs the server as its last arguments and must exec it in place
//     (the server keeps the spawned pid), e.g. unshare with a private /dev/shm (tests/chaos).
export async function startServer({ args = [], startTimeoutMs = 60_000, stopTimeoutMs = 30_000,
                                    env = {}, pipeline = 'demo', wrapper = [] } = {}) {
    const binary = omnirtBinary();
    const argv = ['serve', '--host', '127.0.0.1', '--port', '0', ...args];
    if (pipeline === 'demo' && !args.includes('--config')) argv.push('--demo');
    const command = wrapper.length > 0 ? wrapper[0] : binary;
    const commandArgs = wrapper.length > 0 ? [...wrapper.slice(1), binary, ...argv] : argv;
    const proc = spawn(command, commandArgs, {
        cwd: repoRoot,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(proc);

    let stderr = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (text) => {
        stderr += text;
        if (stderr.length > 2 * kStderrKeepBytes) stderr = stderr.slice(-kStderrKeepBytes);
    });
    const stdoutLines = [];
    const exited = new Promise((resolve) => {
        proc.once('exit', (code, signal) => {
            live.delete(proc);
            resolve({ code, signal });
        });
    });
    const spawnError = new Promise((resolve) => proc.once('error', resolve));
    const describe = () =>
        `${binary} ${argv.join(' ')}\n--- stdout ---\n${stdoutLines.join('\n')}\n` +
        `--- stderr (tail) ---\n${stderr.slice(-8192)}`;

    const listening = new Promise((resolve) => {
        const lines = readline.createInterface({ input: proc.stdout });
        lines.on('line', (line) => {
            stdoutLines.push(line);
            const match = kListeningLine.exec(line);
            if (match) resolve({ host: match[1], port: Number(match[2]) });
        });
    });
    let timer;
    const guard = new Promise((resolve) => {
        timer = setTimeout(() => resolve('timeout'), startTimeoutMs);
    });
    const first = await Promise.race([
        listening.then((address) => ({ address })),
        exited.then((exit) => ({ exit })),
        spawnError.then((error) => ({ error })),
        guard.then(() => ({ timeout: true })),
    ]);
    clearTimeout(timer);
    if (!first.address) {
        proc.kill('SIGKILL');
        await Promise.race([exited, spawnError]);
        const why = first.error ? `could not be started: ${first.error.message}`
                  : first.exit ? `exited (code ${first.exit.code}, signal ${first.exit.signal}) ` +
                                 'before it printed its listening line'
                  : `printed no listening line within ${startTimeoutMs} ms`;
        throw new Error(`omnirt serve ${why}\n${describe()}`);
    }

    const { port } = first.address;
    const origin = `http://127.0.0.1:${port}`;
    let stopping;
    const stop = () => {
        stopping ??= (async () => {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
            let killTimer;
            const result = await Promise.race([
                exited,
                new Promise((resolve) => {
                    killTimer = setTimeout(() => resolve(null), stopTimeoutMs);
                }),
            ]);
            clearTimeout(killTimer);
            if (result === null) {
                proc.kill('SIGKILL');
                await exited;
                throw new Error(`omnirt serve did not exit within ${stopTimeoutMs} ms of SIGTERM ` +
                                `(killed)\n${describe()}`);
            }
            if (result.code !== 0) {
                throw new Error(`omnirt serve exited with code ${result.code}, signal ` +
                                `${result.signal} after SIGTERM (expected 0)\n${describe()}`);
            }
        })();
        return stopping;
    };
    return {
        port,
        origin,
        baseURL: `${origin}/v1`,
        proc,
        stop,
        // The server's stderr so far (its logs), for failure messages.
        logs: () => stderr,
        // Resolves with {code, signal} when the process has exited.
        exited,
    };
}
