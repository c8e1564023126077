// A client that goes away mid-stream aborts its request in every stage. Each test starts a slow
// stream (token_delay_ms 300 over a long message: about a minute), waits until the thinker holds
// it (GET /metrics), disconnects, then waits until every stage holds nothing and the coordinator
// counted an abort. Without the abort the thinker would hold the request far past the guard.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import OpenAI from 'openai';

import { startServer } from './server.mjs';
import {
    decodeBase64, drainAborted, kRequestTimeoutMs, openaiClient, pipelineState, pollUntil,
    waitUntilIdle,
} from './helpers.mjs';

const kModel = 'demo';
const kStages = ['decode', 'talker', 'thinker'];
const kLongText = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');
const kSlow = { thinker: { token_delay_ms: 300 } };

let server;
let client;

before(async () => {
    server = await startServer();
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

// Runs one abort scenario: `open(signal)` starts the request and resolves (with a function that
// settles the client side after the abort) once the client has seen output; the test then waits for the thinker to hold the request, aborts, and checks that
// every stage lets go of it.
async function abortMidStream(open) {
    const before = await waitUntilIdle(server, { stages: kStages, timeoutMs: 30_000 });
    assert.deepEqual(Object.keys(before.active).sort(), kStages, 'a gauge per stage');
    const controller = new AbortController();
    let finish;
    try {
        finish = await open(controller.signal);
        await pollUntil(async () => (await pipelineState(server)).active.thinker >= 1,
                        { timeoutMs: 30_000, what: 'the thinker holds the streaming request' });
    } finally {
        controller.abort();
    }
    await finish?.();
    const afterAbort = await waitUntilIdle(server, { stages: kStages, timeoutMs: 30_000 });
    assert.ok(afterAbort.aborted >= before.aborted + 1,
              `the coordinator counted the abort (${before.aborted} -> ${afterAbort.aborted})`);
}

test('chat text stream: abort after the first chunk', async () => {
    await abortMidStream(async (signal) => {
        const stream = await client.chat.completions.create({
            model: kModel, messages: [{ role: 'user', content: kLongText }], stream: true,
            stage_params: kSlow,
        }, { signal });
        const iterator = stream[Symbol.asyncIterator]();
        for (;;) {
            const { value, done } = await iterator.next();
            assert.equal(done, false, 'the stream ended before its first word');
            if (value.choices[0]?.delta?.content) break;
        }
        return () => drainAborted(iterator);
    });
});

test('chat audio stream: abort after the first audio chunk (thinker and talker)', async () => {
    await abortMidStream(async (signal) => {
        const stream = await client.chat.completions.create({
            model: kModel, messages: [{ role: 'user', content: kLongText }], stream: true,
            modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'pcm16' },
            stage_params: kSlow,
        }, { signal });
        const iterator = stream[Symbol.asyncIterator]();
        for (;;) {
            const { value, done } = await iterator.next();
            assert.equal(done, false, 'the stream ended before its first audio');
            const data = value.choices[0]?.delta?.audio?.data;
            if (data && decodeBase64(data).length > 0) break;
        }
        return () => drainAborted(iterator);
    });
});

test('speech SSE: abort after the first audio delta', async () => {
    await abortMidStream(async (signal) => {
        const response = await fetch(`${server.baseURL}/audio/speech`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
                model: kModel, voice: 'alloy', input: kLongText, response_format: 'pcm',
                stream_format: 'sse', stage_params: kSlow,
            }),
            signal: AbortSignal.any([signal, AbortSignal.timeout(kRequestTimeoutMs)]),
        });
        assert.equal(response.status, 200);
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let text = '';
        while (!text.includes('speech.audio.delta')) {
            const { value, done } = await reader.read();
            assert.equal(done, false, 'the stream ended before its first delta');
            text += decoder.decode(value, { stream: true });
        }
        return async () => {
            await reader.read().catch(() => {});
        };
    });
});

test('non-streaming chat: abort while the thinker works', async () => {
    await abortMidStream(async (signal) => {
        const pending = client.chat.completions.create({
            model: kModel, messages: [{ role: 'user', content: kLongText }],
            modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' },
            stage_params: kSlow,
        }, { signal });
        // Nothing arrives before the end: the request is under way once the thinker holds it,
        // which abortMidStream waits for.
        const settled = pending.then(() => 'answered', (error) => error);
        return async () => {
            const outcome = await settled;
            assert.ok(outcome instanceof OpenAI.APIUserAbortError,
                      `the client gave up, it got no answer: ${outcome}`);
        };
    });
});

test('the server still answers after the aborts', async () => {
    const completion = await client.chat.completions.create({
        model: kModel, messages: [{ role: 'user', content: 'hello there' }],
    });
    assert.equal(completion.choices[0].message.content, 'You said: hello there.');
});
