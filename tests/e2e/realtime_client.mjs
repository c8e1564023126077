// A small client of the realtime API (GET /v1/realtime) over the `ws` package, for the e2e
// tests and nothing else: it records every server event and lets a test wait for the next one
// of a type (with a hang guard, never a sleep).
//
//   const rt = await RealtimeClient.connect(server, { headers, protocols });
//   rt.send({ type: 'response.create' });
//   const done = await rt.next('response.done');
//   await rt.close();
import assert from 'node:assert/strict';
import WebSocket from 'ws';

export const kEventTimeoutMs = 60_000;

export class RealtimeClient {
    constructor(socket) {
        this.socket = socket;
        this.events = [];      // every server event, in order
        this.cursor = 0;       // next() looks from here on
        this.waiters = [];
        this.closed = new Promise((resolve) => {
            socket.on('close', (code, reason) => {
                this.closeInfo = { code, reason: reason.toString() };
                this.wake();
                resolve(this.closeInfo);
            });
        });
        socket.on('message', (data, binary) => {
            assert.equal(binary, false, 'the server sends text events only');
            this.events.push(JSON.parse(data.toString()));
            this.wake();
        });
        socket.on('error', () => {});  // 'close' follows and tells
    }

    // Resolves once open; rejects with the HTTP status when the upgrade is refused.
    static connect(server, { headers = {}, protocols, query = '' } = {}) {
        const url = `ws://127.0.0.1:${server.port}/v1/realtime${query}`;
        const socket = new WebSocket(url, protocols, { headers, maxPayload: 256 << 20 });
        const client = new RealtimeClient(socket);
        return new Promise((resolve, reject) => {
            socket.once('open', () => resolve(client));
            socket.once('unexpected-response', (request, response) => {
                const error = new Error(`upgrade refused: HTTP ${response.statusCode}`);
                error.status = response.statusCode;
                reject(error);
            });
            socket.once('error', reject);
        });
    }

    wake() {
        const waiters = this.waiters;
        this.waiters = [];
        for (const wake of waiters) wake();
    }

    send(event) {
        this.socket.send(typeof event === 'string' ? event : JSON.stringify(event));
    }

    // The next event (after the cursor) matching `type` (a string or a predicate); events before
    // it are skipped but kept in `events`. Fails after `timeoutMs` or when the socket closes.
    async next(type, { timeoutMs = kEventTimeoutMs } = {}) {
        const match = typeof type === 'function' ? type : (event) => event.type === type;
        const deadline = Date.now() + timeoutMs;
        for (;;) {
            while (this.cursor < this.events.length) {
                const event = this.events[this.cursor++];
                if (match(event)) return event;
            }
            if (this.closeInfo) {
                assert.fail(`socket closed (${this.closeInfo.code} ${this.closeInfo.reason}) ` +
                            `while waiting for ${type}; events: ${this.types().join(', ')}`);
            }
            const left = deadline - Date.now();
            if (left <= 0) {
                assert.fail(`no ${type} within ${timeoutMs} ms; events: ${this.types().join(', ')}`);
            }
            await new Promise((resolve) => {
                const timer = setTimeout(resolve, left);
                this.waiters.push(() => {
                    clearTimeout(timer);
                    resolve();
                });
            });
        }
    }

    // Events of `type` seen so far (whatever the cursor).
    all(type) {
        return this.events.filter((event) => event.type === type);
    }

    types() {
        return this.events.map((event) => event.type);
    }

    async close() {
        if (!this.closeInfo) this.socket.close(1000);
        return this.closed;
    }
}

// pcm16 little-endian mono of a sine tone (24 kHz), base64.
export function toneBase64({ seconds = 0.5, hz = 440, amplitude = 0.3, sampleRate = 24_000 } = {}) {
    const frames = Math.round(seconds * sampleRate);
    const bytes = Buffer.alloc(frames * 2);
    for (let i = 0; i < frames; ++i) {
        bytes.writeInt16LE(Math.round(amplitude * 32767 * Math.sin((2 * Math.PI * hz * i) / sampleRate)), 2 * i);
    }
    return bytes.toString('base64');
}

// Samples in base64 pcm16 deltas, and whether any is non-zero.
export function pcmStats(deltas) {
    let samples = 0;
    let nonzero = false;
    for (const delta of deltas) {
        const bytes = Buffer.from(delta, 'base64');
        samples += bytes.length / 2;
        for (let i = 0; i + 1 < bytes.length && !nonzero; i += 2) nonzero = bytes.readInt16LE(i) !== 0;
    }
    return { samples, nonzero };
}
