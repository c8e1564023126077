// Shared pieces of the end-to-end tests: an openai client for a server, raw HTTP through curl,
// and parsers for what the server sends (SSE, WAV, Prometheus text, OpenAI errors).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

import OpenAI from 'openai';

export { makeBmp, makeWav } from './media_files.mjs';

// Every request of the suite gives up after this long: a hang guard, never a synchronisation.
export const kRequestTimeoutMs = 60_000;

// The demo pipeline's audio: 24 kHz mono, 360 samples per code point at speed 1
// (docs/demo_pipeline.md).
export const kSampleRate = 24_000;
export const kSamplesPerCodePoint = 360;

// An openai client for `server`. No retries: a 429 or a 5xx must reach the test as it is.
export function openaiClient(server, { apiKey = 'sk-unused', ...options } = {}) {
    return new OpenAI({
        baseURL: server.baseURL,
        apiKey,
        maxRetries: 0,
        timeout: kRequestTimeoutMs,
        ...options,
    });
}

// Raw HTTP through curl. `body` (string or Buffer) goes through a file; so does a response.
// Returns {status, headers (lower-case names, the final response's), body: Buffer}. Throws when
// curl fails (connection refused, reset, timeout), with curl's message.
export async function curl({ method = 'GET', url, headers = {}, body, extraArgs = [],
                             maxTimeS = kRequestTimeoutMs / 1000 }) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-curl-'));
    try {
        const headerFile = path.join(dir, 'headers');
        const bodyFile = path.join(dir, 'body');
        const args = ['-sS', '--max-time', String(maxTimeS), '-X', method, '-D', headerFile,
                      '-o', bodyFile, '-w', '%{http_code}'];
        for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
        if (body !== undefined) {
            const requestFile = path.join(dir, 'request');
            await writeFile(requestFile, body);
            args.push('--data-binary', `@${requestFile}`);
        }
        args.push(...extraArgs, url);
        const { code, stdout, stderr } = await runProcess('curl', args);
        if (code !== 0) {
            throw new Error(`curl ${method} ${url} failed (exit ${code}): ${stderr.trim()}`);
        }
        const status = Number(stdout.trim());
        const headerText = await readFile(headerFile, 'utf8');
        const responseBody = await readFile(bodyFile).catch(() => Buffer.alloc(0));
        return { status, headers: parseHeaderBlock(headerText), body: responseBody };
    } finally {
        await rm(dir, { recursive: true, force: true });
    }
}

export function runProcess(command, args, { input } = {}) {
    return new Promise((resolve, reject) => {
        const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.setEncoding('utf8').on('data', (text) => (stdout += text));
        child.stderr.setEncoding('utf8').on('data', (text) => (stderr += text));
        child.once('error', reject);
        child.once('close', (code) => resolve({ code, stdout, stderr }));
        child.stdin.end(input);
    });
}

// The last header block of a `curl -D` dump (an interim 100 Continue comes first).
function parseHeaderBlock(text) {
    const blocks = text.split(/\r?\n\r?\n/).filter((block) => block.trim() !== '');
    const headers = {};
    for (const line of (blocks.at(-1) ?? '').split(/\r?\n/).slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    return headers;
}

export function mediaType(contentType) {
    return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

// The `data:` payloads of an SSE body, in order (multi-line data joined by "\n").
export function sseData(text) {
    const events = [];
    for (const block of text.split(/\r?\n\r?\n/)) {
        const data = block.split(/\r?\n/).filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).replace(/^ /, ''));
        if (data.length > 0) events.push(data.join('\n'));
    }
    return events;
}

// Strict base64 (standard alphabet, padded): the bytes, or an assertion failure.
export function decodeBase64(text, what = 'base64') {
    assert.equal(typeof text, 'string', `${what} is not a string`);
    assert.ok(text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text),
              `${what} is not padded standard base64: ${JSON.stringify(text.slice(0, 80))}`);
    return Buffer.from(text, 'base64');
}

// A RIFF/WAVE file: its fmt chunk and its data chunk. Fails on anything malformed.
export function parseWav(bytes) {
    const buf = Buffer.from(bytes);
    assert.ok(buf.length >= 44, `a WAV file has at least 44 bytes, got ${buf.length}`);
    assert.equal(buf.toString('latin1', 0, 4), 'RIFF', 'no RIFF magic');
    assert.equal(buf.toString('latin1', 8, 12), 'WAVE', 'no WAVE form type');
    assert.equal(buf.readUInt32LE(4), buf.length - 8, 'RIFF size is not the file size - 8');
    let fmt;
    let data;
    for (let offset = 12; offset + 8 <= buf.length;) {
        const id = buf.toString('latin1', offset, offset + 4);
        const size = buf.readUInt32LE(offset + 4);
        const body = offset + 8;
        assert.ok(body + size <= buf.length, `chunk '${id}' (${size} bytes) runs past the end`);
        if (id === 'fmt ') {
            fmt = {
                audioFormat: buf.readUInt16LE(body),
                channels: buf.readUInt16LE(body + 2),
                sampleRate: buf.readUInt32LE(body + 4),
                byteRate: buf.readUInt32LE(body + 8),
                blockAlign: buf.readUInt16LE(body + 12),
                bitsPerSample: buf.readUInt16LE(body + 14),
            };
        } else if (id === 'data') {
            data = buf.subarray(body, body + size);
        }
        offset = body + size + (size % 2);
    }
    assert.ok(fmt, 'no fmt chunk');
    assert.ok(data, 'no data chunk');
    return { ...fmt, data };
}

// Little-endian PCM16 samples of `bytes`.
export function pcm16Samples(bytes) {
    assert.equal(bytes.length % 2, 0, `PCM16 has an even byte count, got ${bytes.length}`);
    const samples = new Int16Array(bytes.length / 2);
    for (let i = 0; i < samples.length; ++i) samples[i] = bytes.readInt16LE(2 * i);
    return samples;
}

export function codePoints(text) {
    return [...text].length;
}

// Prometheus text: [{name, labels: {k: v}, value}].
export function parseMetrics(text) {
    const samples = [];
    for (const line of text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/.exec(line);
        assert.ok(match, `not a Prometheus sample line: ${JSON.stringify(line)}`);
        const labels = {};
        for (const label of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
            labels[label[1]] = label[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
        }
        samples.push({ name: match[1], labels, value: Number(match[3]) });
    }
    return samples;
}

export function findSamples(samples, name, labels = {}) {
    return samples.filter((sample) => sample.name === name &&
        Object.entries(labels).every(([key, value]) => sample.labels[key] === value));
}

export async function fetchMetrics(server) {
    const response = await fetch(`${server.origin}/metrics`, {
        signal: AbortSignal.timeout(kRequestTimeoutMs),
    });
    assert.equal(response.status, 200, 'GET /metrics');
    return parseMetrics(await response.text());
}

// Calls `probe` until it returns a truthy value (returned) or `timeoutMs` passes (fails with
// `what` and the last value). A hang guard around polling, not a synchronisation sleep.
export async function pollUntil(probe, { timeoutMs = 30_000, intervalMs = 50, what = 'condition' } = {}) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
        last = await probe();
        if (last) return last;
        if (Date.now() > deadline) {
            assert.fail(`${what} did not hold within ${timeoutMs} ms (last: ${JSON.stringify(last)})`);
        }
        await delay(intervalMs);
    }
}

// An OpenAI error body: {"error": {"message", "type", "param", "code"}}; returns the error.
export function assertOpenAIError(body, { param } = {}) {
    const json = typeof body === 'string' || Buffer.isBuffer(body) ? JSON.parse(body.toString()) : body;
    assert.equal(typeof json.error, 'object', `no error object in ${JSON.stringify(json)}`);
    const { error } = json;
    assert.ok(error !== null, 'error is null');
    for (const key of ['message', 'type', 'param', 'code']) {
        assert.ok(key in error, `error has no '${key}': ${JSON.stringify(error)}`);
    }
    assert.equal(typeof error.message, 'string');
    assert.ok(error.message.length > 0, 'empty error message');
    assert.equal(typeof error.type, 'string');
    if (param !== undefined) assert.equal(error.param, param, `param of ${JSON.stringify(error)}`);
    return error;
}

// Runs `request` (a promise factory) and returns the openai APIError it must fail with.
export async function expectApiError(request, status) {
    try {
        const result = await request();
        assert.fail(`expected HTTP ${status}, the request succeeded: ${JSON.stringify(result).slice(0, 300)}`);
    } catch (error) {
        if (error instanceof OpenAI.APIConnectionError) {
            assert.fail(`expected HTTP ${status}, got no response: ${error.message} (${causeChain(error)})`);
        }
        if (!(error instanceof OpenAI.APIError) || error.status === undefined) throw error;
        assert.equal(error.status, status, `status of: ${error.message}`);
        assertOpenAIError({ error: error.error });
        return error;
    }
}

// "fetch failed <- write EPIPE": the messages and codes of an error's causes.
function causeChain(error) {
    const links = [];
    for (let cause = error.cause; cause && links.length < 5; cause = cause.cause) {
        links.push([cause.message, cause.code].filter(Boolean).join(' '));
    }
    return links.join(' <- ') || 'no cause';
}

// Reads an aborted openai stream to its end: openai's iterator ends quietly on an abort, or
// rejects with an abort error; anything else is rethrown.
export async function drainAborted(iterator) {
    try {
        for (;;) {
            const { done } = await iterator.next();
            if (done) return;
        }
    } catch (error) {
        if (!(error instanceof OpenAI.APIUserAbortError || error?.name === 'AbortError')) throw error;
    }
}

// The server's view of its pipeline from GET /metrics: requests each stage holds, aborted
// requests so far, live requests by state, HTTP requests in flight.
export async function pipelineState(server) {
    const samples = await fetchMetrics(server);
    const active = {};
    for (const sample of findSamples(samples, 'omnirt_stage_active_requests')) {
        active[sample.labels.stage] = sample.value;
    }
    const count = (name, labels) => findSamples(samples, name, labels)[0]?.value ?? 0;
    return {
        active,
        aborted: count('omnirt_pipeline_requests_total', { state: 'aborted' }),
        running: count('omnirt_pipeline_live_requests', { state: 'running' }),
        pending: count('omnirt_pipeline_live_requests', { state: 'pending' }),
        inFlight: count('omnirt_http_requests_in_flight', {}),
    };
}

// Waits until no stage holds a request (`stages`, default every stage the metrics name) and
// nothing is live or in flight; returns that state.
export async function waitUntilIdle(server, { stages, timeoutMs = 60_000 } = {}) {
    return pollUntil(async () => {
        const state = await pipelineState(server);
        const names = stages ?? Object.keys(state.active);
        const idle = names.every((stage) => state.active[stage] === 0) &&
                     state.running === 0 && state.pending === 0 && state.inFlight === 0;
        return idle ? state : false;
    }, { timeoutMs, what: 'every stage idle (omnirt_stage_active_requests 0)' });
}
