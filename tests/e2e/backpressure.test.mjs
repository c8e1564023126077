// Slow readers on the Qwen3 chat pipeline (the AR engine, on a generated tiny checkpoint): a
// client that stops reading a stream pauses its request in the engine (no token generated for it,
// its KV blocks kept) while other requests finish; once it reads again it receives the whole
// answer, identical to a fast reader's. A client that never reads again is cut after the stall
// timeout, its request aborted and its KV blocks freed.
//
// The servers run with small marks (--stream-high-water-kib 16), and each token carries 20 log
// probabilities, so that the answer (thousands of tokens) is far larger than what the kernel's
// socket buffers absorb. Everything waits for events or polls /metrics under a guard.
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { omnirtBinary, startServer } from './server.mjs';
import { fetchMetrics, findSamples, kRequestTimeoutMs, pollUntil, runProcess } from './helpers.mjs';

const kModel = 'qwen3-chat';
const kMaxTokens = 4000;
const kMarks = ['--stream-high-water-kib', '16', '--stream-low-water-kib', '4'];

const longChat = {
    model: kModel,
    messages: [{ role: 'user', content: 'Tell me everything about C++.' }],
    max_tokens: kMaxTokens,
    ignore_eos: true,
    temperature: 0,
    logprobs: true,
    top_logprobs: 20,
    stream: true,
};

let cacheDir;

before(async () => {
    cacheDir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-backpressure-'));
    const made = await runProcess(omnirtBinary(), ['make-checkpoint', '--arch', 'qwen3', '--preset',
                                                   'tiny', '--quiet', '--out', cacheDir]);
    assert.equal(made.code, 0, made.stderr);
});

after(async () => {
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

function serve(stallSeconds) {
    return startServer({
        pipeline: 'default',
        args: ['--model-path', cacheDir, ...kMarks, '--stream-stall-timeout', String(stallSeconds)],
    });
}

// A streamed chat read through node:http, whose reading the test can stop (pause: the socket is
// no longer read, so the kernel's buffers fill and then the server's) and start again.
function openStream(server, body) {
    const received = [];
    let firstData;
    const gotData = new Promise((resolve) => { firstData = resolve; });
    let response;
    const ended = new Promise((resolve) => {
        const request = http.request(`${server.origin}/v1/chat/completions`, {
            method: 'POST',
            agent: false,
            headers: { 'content-type': 'application/json' },
            timeout: kRequestTimeoutMs,
        }, (res) => {
            response = res;
            res.on('data', (chunk) => {
                received.push(chunk);
                firstData();
            });
            res.on('end', () => resolve({ complete: true }));
            res.on('aborted', () => resolve({ complete: false }));
            res.on('error', () => resolve({ complete: false }));
        });
        request.on('error', () => resolve({ complete: false }));
        request.on('timeout', () => request.destroy(new Error('hang guard')));
        request.end(JSON.stringify(body));
    });
    return {
        gotData,
        ended,
        pause: () => response.pause(),
        resume: () => response.resume(),
        text: () => Buffer.concat(received).toString('utf8'),
    };
}

// What a stream said: the text, the log probabilities' tokens, the finish reason, whether it
// ended with [DONE].
function parseChat(text) {
    const out = { text: '', tokens: [], finish: null, done: false, chunks: 0 };
    const events = text.split('\n\n');
    events.pop();  // what follows the last complete event (a cut stream's partial one)
    for (const event of events) {
        if (!event.startsWith('data: ')) continue;
        const data = event.slice('data: '.length);
        if (data === '[DONE]') {
            out.done = true;
            continue;
        }
        const chunk = JSON.parse(data);
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        out.chunks += 1;
        out.text += choice.delta?.content ?? '';
        for (const entry of choice.logprobs?.content ?? []) {
            out.tokens.push(`${entry.token}|${entry.top_logprobs.map((t) => t.token).join(',')}`);
        }
        if (choice.finish_reason) out.finish = choice.finish_reason;
    }
    return out;
}

async function engineState(server) {
    const samples = await fetchMetrics(server);
    const one = (name, labels = {}) => findSamples(samples, name, labels)[0]?.value;
    return {
        streamsPaused: one('omnirt_http_streams_paused'),
        pauses: one('omnirt_http_stream_pauses_total'),
        stalls: one('omnirt_http_stream_stalls_total'),
        paused: one('omnirt_stage_paused_requests', { stage: 'thinker' }),
        generated: one('omnirt_stage_generated_tokens_total', { stage: 'thinker' }),
        kvUsed: one('omnirt_stage_kv_blocks_used', { stage: 'thinker' }),
        kvTotal: one('omnirt_stage_kv_blocks_total', { stage: 'thinker' }),
        active: one('omnirt_stage_active_requests', { stage: 'thinker' }),
        aborted: one('omnirt_pipeline_requests_total', { state: 'aborted' }) ?? 0,
        running: one('omnirt_pipeline_live_requests', { state: 'running' }) ?? 0,
    };
}

async function shortChat(server) {
    const response = await fetch(`${server.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
            model: kModel, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8,
            ignore_eos: true, temperature: 0,
        }),
        signal: AbortSignal.timeout(kRequestTimeoutMs),
    });
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.equal(body.usage.completion_tokens, 8);
    return body;
}

// Nothing left in the thinker: no request, no KV block outside the prefix cache, no pause.
async function waitEngineIdle(server) {
    return pollUntil(async () => {
        const state = await engineState(server);
        return state.active === 0 && state.kvUsed === 0 && state.paused === 0 &&
               state.running === 0 && state.streamsPaused === 0 ? state : false;
    }, { timeoutMs: 60_000, what: 'the thinker idle with its KV blocks free' });
}

describe('a reader that stops reading, then reads again', () => {
    let server;
    before(async () => { server = await serve(120); });
    after(async () => { await server?.stop(); });

    test('pauses generation, lets others finish, and then gets the whole answer', async () => {
        // The reference: a fast reader's answer. A warm-up run fills the prefix cache first, so
        // that the reference and the slow reader both start from it (the same computation).
        const warm = openStream(server, longChat);
        assert.deepEqual(await warm.ended, { complete: true });
        const fast = openStream(server, longChat);
        assert.deepEqual(await fast.ended, { complete: true });
        const reference = parseChat(fast.text());
        assert.equal(reference.finish, 'length');
        assert.equal(reference.tokens.length, kMaxTokens);
        assert.ok(reference.done);
        const idle = await waitEngineIdle(server);
        assert.ok(idle.kvTotal > 0, 'the thinker reports its KV cache');

        const slow = openStream(server, longChat);
        await slow.gotData;
        slow.pause();
        // The server's buffer passes the high-water mark: the thinker holds the request. While
        // the kernel's buffers still take bytes the stream may resume and pause again; a round
        // counts only when no pause came between its two readings (and it is still paused).
        let paused;
        let later;
        for (let round = 0; ; ++round) {
            assert.ok(round < 10, 'the stream never stayed paused');
            paused = await pollUntil(async () => {
                const state = await engineState(server);
                return state.streamsPaused === 1 && state.paused === 1 ? state : false;
            }, { timeoutMs: 60_000, what: 'the slow stream paused in the thinker' });
            // Another request runs to its end meanwhile.
            await shortChat(server);
            later = await pollUntil(async () => {
                const state = await engineState(server);
                return state.generated >= paused.generated + 8 ? state : false;
            }, { timeoutMs: 60_000, what: 'the short request counted in the thinker' });
            if (later.pauses === paused.pauses && later.streamsPaused === 1) break;
        }
        const heldTokens = paused.generated - idle.generated;
        assert.ok(heldTokens < kMaxTokens, `generation stopped early (${heldTokens} tokens)`);
        assert.ok(paused.kvUsed > 0, 'the paused request keeps its KV blocks');
        // Only the short request's 8 tokens: the paused one generated nothing.
        assert.equal(later.generated, paused.generated + 8, 'the paused request generated tokens');
        assert.equal(later.paused, 1);
        assert.equal(later.kvUsed, paused.kvUsed, 'the paused request kept its KV blocks');

        slow.resume();
        assert.deepEqual(await slow.ended, { complete: true });
        const answer = parseChat(slow.text());
        assert.equal(answer.text, reference.text);
        assert.deepEqual(answer.tokens, reference.tokens);
        assert.equal(answer.finish, 'length');
        assert.ok(answer.done);
        const end = await waitEngineIdle(server);
        assert.equal(end.stalls, 0);
        console.log(`paused after ${heldTokens} of ${kMaxTokens} tokens; ` +
                    `${paused.kvUsed} of ${paused.kvTotal} KV blocks held while paused`);
    });
});

describe('a reader that never reads again', () => {
    let server;
    before(async () => { server = await serve(5); });
    after(async () => { await server?.stop(); });

    test('is cut after the stall timeout; its request is aborted and freed', async () => {
        const before = await waitEngineIdle(server);
        const stalled = openStream(server, longChat);
        await stalled.gotData;
        stalled.pause();
        await pollUntil(async () => (await engineState(server)).paused === 1,
                        { timeoutMs: 60_000, what: 'the stalled stream paused in the thinker' });
        await shortChat(server);  // other requests go on
        await pollUntil(async () => (await engineState(server)).stalls === before.stalls + 1,
                        { timeoutMs: 60_000, what: 'the stalled stream cut' });
        const idle = await waitEngineIdle(server);
        assert.equal(idle.aborted, before.aborted + 1, 'the stalled request was aborted');
        stalled.resume();
        const outcome = await stalled.ended;
        const partial = parseChat(stalled.text());
        assert.ok(!outcome.complete || !partial.done, 'the stalled reader did not get the end');
        assert.ok(partial.tokens.length < kMaxTokens);
        await shortChat(server);  // the server still serves
        assert.match(server.logs(), /stream stalled/);
    });
});
