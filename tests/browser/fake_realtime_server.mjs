// A scripted stand-in for omnirt's realtime endpoint, to test the playground's voice client in
// isolation: serves the page's files from the source tree (src/serve/playground/web), /v1/models,
// /v1/audio/voices, and a WebSocket at /v1/realtime speaking the OpenAI Realtime GA events with
// an energy VAD over the appended PCM16.
//
//   const fake = await startFakeRealtimeServer({ replySeconds: 8 });
//   ... fake.origin, fake.received (client events, appends summarized), fake.appendedSamples ...
//   await fake.close();
//
// Per turn: speech_started when a 40 ms window's RMS passes a threshold, speech_stopped after
// 400 ms below it, then conversation.item.added (user), response.created, the assistant item,
// `replySeconds` of a 220 Hz tone as response.output_audio.delta in 200 ms pieces one every
// `paceMs` (200: real time) with a transcript delta, and response.done. Speech that starts while
// a response streams interrupts it: two more deltas (already on their way), then response.done
// with status cancelled. Minimal RFC 6455 framing (text, close, ping), no
// extensions; enough for one browser.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';

import { repoRoot } from '../e2e/server.mjs';

const kWebDir = path.join(repoRoot, 'src', 'serve', 'playground', 'web');
const kRate = 24000;
const kLateDeltas = 2;  // deltas an interrupted response still sends
const kTypes = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
                 '.css': 'text/css; charset=utf-8' };

export async function startFakeRealtimeServer({ replySeconds = 1, paceMs = 20, voices = ['ethan'] } = {}) {
    const state = { received: [], responses: [], appendedSamples: 0, firstAppendAt: 0, lastAppendAt: 0,
                    sockets: new Set() };
    const server = http.createServer(async (request, response) => {
        const url = new URL(request.url, 'http://x');
        if (url.pathname === '/v1/models') return json(response, { object: 'list', data: [{ id: 'fake-omni' }] });
        if (url.pathname === '/v1/audio/voices') {
            return json(response, { voices: voices.map((id) => ({ id, name: id })) });
        }
        const file = url.pathname === '/' ? 'index.html' : url.pathname.replace(/^\/playground\//, '');
        if (file.includes('/') || file.includes('..')) return notFound(response);
        try {
            const body = await readFile(path.join(kWebDir, file));
            response.writeHead(200, { 'content-type': kTypes[path.extname(file)] ?? 'application/octet-stream' });
            response.end(body);
        } catch {
            notFound(response);
        }
    });
    server.on('upgrade', (request, socket) => {
        if (new URL(request.url, 'http://x').pathname !== '/v1/realtime') return socket.destroy();
        const accept = createHash('sha1')
            .update(`${request.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
            .digest('base64');
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
                     `Sec-WebSocket-Accept: ${accept}\r\n\r\n`);
        state.sockets.add(socket);
        socket.on('close', () => state.sockets.delete(socket));
        socket.on('error', () => socket.destroy());
        new Conversation(socket, state, { replySeconds, paceMs });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    return {
        origin: `http://127.0.0.1:${port}`,
        get received() { return state.received; },
        get appendedSamples() { return state.appendedSamples; },
        // Per response: {id, itemId, status, bytesBeforeInterrupt, lateDeltas, interrupted}.
        get responses() { return state.responses; },
        // Appended audio per second of wall time, from the first append to the last.
        get appendRate() {
            const seconds = (state.lastAppendAt - state.firstAppendAt) / 1000;
            return seconds > 0 ? state.appendedSamples / seconds : 0;
        },
        close: () => new Promise((resolve) => {
            for (const socket of state.sockets) socket.destroy();
            server.close(resolve);
        }),
    };
}

function json(response, body) {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
}

function notFound(response) {
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end('{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":404}}');
}

class Conversation {
    constructor(socket, state, { replySeconds, paceMs }) {
        this.socket = socket;
        this.state = state;
        this.replySeconds = replySeconds;
        this.paceMs = paceMs;
        this.current = null;  // the response still streaming
        this.pending = Buffer.alloc(0);
        this.speaking = false;
        this.quietMs = 0;
        this.heardMs = 0;
        this.turns = 0;
        this.timers = new Set();
        socket.on('data', (data) => this.read(data));
        socket.on('close', () => this.timers.forEach(clearTimeout));
        this.send({ type: 'session.created', session: { type: 'realtime' } });
    }

    read(data) {
        this.pending = Buffer.concat([this.pending, data]);
        for (;;) {
            const frame = parseFrame(this.pending);
            if (!frame) return;
            this.pending = this.pending.subarray(frame.length);
            if (frame.opcode === 8) {
                this.socket.end(frameOf(8, Buffer.alloc(0)));
                return;
            }
            if (frame.opcode === 9) this.socket.write(frameOf(10, frame.payload));
            if (frame.opcode === 1) this.receive(JSON.parse(frame.payload.toString('utf8')));
        }
    }

    send(event) {
        if (!this.socket.destroyed) this.socket.write(frameOf(1, Buffer.from(JSON.stringify(event))));
    }

    receive(event) {
        if (event.type === 'input_audio_buffer.append') {
            const bytes = Buffer.from(event.audio, 'base64');
            this.state.received.push({ type: event.type, bytes: bytes.length });
            this.listen(bytes);
            return;
        }
        this.state.received.push(event);
        if (event.type === 'session.update') {
            this.send({ type: 'session.updated', session: event.session });
        }
    }

    // The energy VAD over one appended chunk.
    listen(bytes) {
        const now = Date.now();
        const samples = bytes.length / 2;
        if (this.state.appendedSamples === 0) this.state.firstAppendAt = now;
        this.state.lastAppendAt = now;
        this.state.appendedSamples += samples;
        let sum = 0;
        for (let i = 0; i + 1 < bytes.length; i += 2) sum += (bytes.readInt16LE(i) / 32768) ** 2;
        const loud = Math.sqrt(sum / Math.max(samples, 1)) > 0.02;
        const ms = (samples / kRate) * 1000;
        this.heardMs += ms;
        if (loud && !this.speaking) {
            this.speaking = true;
            if (this.current) this.current.interrupted = true;
            this.turns += 1;
            this.send({ type: 'input_audio_buffer.speech_started', audio_start_ms: Math.round(this.heardMs),
                        item_id: `item_user_${this.turns}` });
        }
        if (!this.speaking) return;
        this.quietMs = loud ? 0 : this.quietMs + ms;
        if (this.quietMs >= 400) {
            this.speaking = false;
            this.quietMs = 0;
            this.send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: Math.round(this.heardMs),
                        item_id: `item_user_${this.turns}` });
            this.respond(this.turns);
        }
    }

    respond(turn) {
        const userItem = { id: `item_user_${turn}`, type: 'message', role: 'user',
                           content: [{ type: 'input_audio', transcript: null }] };
        const assistantItem = { id: `item_reply_${turn}`, type: 'message', role: 'assistant', content: [] };
        const response = { id: `resp_${turn}`, object: 'realtime.response', status: 'in_progress' };
        const record = { id: response.id, itemId: assistantItem.id, status: 'in_progress',
                         bytesBeforeInterrupt: 0, lateDeltas: 0, interrupted: false };
        this.state.responses.push(record);
        this.current = record;
        this.send({ type: 'conversation.item.added', item: userItem });
        this.send({ type: 'conversation.item.done', item: userItem });
        this.send({ type: 'response.created', response });
        this.send({ type: 'conversation.item.added', item: assistantItem });
        const pieces = Math.round(this.replySeconds / 0.2);
        const pieceSamples = kRate / 5;
        const finish = (status) => {
            record.status = status;
            if (this.current === record) this.current = null;
            this.send({ type: 'conversation.item.done', item: { ...assistantItem, status: 'completed' } });
            this.send({ type: 'response.done', response: { ...response, status,
                                                            usage: { input_tokens: 10, output_tokens: pieces } } });
        };
        const sendPiece = (i) => {
            // Interrupted: the deltas already on their way (kLateDeltas) still arrive, then the
            // response ends as cancelled.
            if (record.interrupted && record.lateDeltas === kLateDeltas) return finish('cancelled');
            if (i === pieces) return finish('completed');
            const tone = Buffer.alloc(2 * pieceSamples);
            for (let n = 0; n < pieceSamples; ++n) {
                const t = (i * pieceSamples + n) / kRate;
                tone.writeInt16LE(Math.round(6000 * Math.sin(2 * Math.PI * 220 * t)), 2 * n);
            }
            this.send({ type: 'response.output_audio.delta', response_id: response.id,
                        item_id: assistantItem.id, output_index: 0, content_index: 0,
                        delta: tone.toString('base64') });
            if (record.interrupted) record.lateDeltas += 1;
            else record.bytesBeforeInterrupt += tone.length;
            if (i === 0) {
                this.send({ type: 'response.output_audio_transcript.delta', response_id: response.id,
                            item_id: assistantItem.id, output_index: 0, content_index: 0, delta: 'a tone' });
            }
            this.later(this.paceMs, () => sendPiece(i + 1));
        };
        sendPiece(0);
    }

    later(ms, work) {
        const timer = setTimeout(() => {
            this.timers.delete(timer);
            work();
        }, ms);
        this.timers.add(timer);
    }
}

// One frame at the start of `buffer` ({opcode, payload, length}), or null when incomplete.
function parseFrame(buffer) {
    if (buffer.length < 2) return null;
    const opcode = buffer[0] & 0x0f;
    const masked = (buffer[1] & 0x80) !== 0;
    let length = buffer[1] & 0x7f;
    let offset = 2;
    if (length === 126) {
        if (buffer.length < 4) return null;
        length = buffer.readUInt16BE(2);
        offset = 4;
    } else if (length === 127) {
        if (buffer.length < 10) return null;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
    }
    const maskOffset = offset;
    if (masked) offset += 4;
    if (buffer.length < offset + length) return null;
    const payload = Buffer.from(buffer.subarray(offset, offset + length));
    if (masked) {
        for (let i = 0; i < payload.length; ++i) payload[i] ^= buffer[maskOffset + (i % 4)];
    }
    return { opcode, payload, length: offset + length };
}

function frameOf(opcode, payload) {
    let header;
    if (payload.length < 126) {
        header = Buffer.from([0x80 | opcode, payload.length]);
    } else if (payload.length < 65536) {
        header = Buffer.alloc(4);
        header[0] = 0x80 | opcode;
        header[1] = 126;
        header.writeUInt16BE(payload.length, 2);
    } else {
        header = Buffer.alloc(10);
        header[0] = 0x80 | opcode;
        header[1] = 127;
        header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    return Buffer.concat([header, payload]);
}
