// --max-concurrency 1: a second generation request while one streams is a 429; info endpoints
// stay open; the slot comes back when the stream's client goes away. Also --model-name.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import OpenAI from 'openai';

import { startServer } from './server.mjs';
import { curl, drainAborted, expectApiError, openaiClient, pollUntil } from './helpers.mjs';

const kModel = 'omni-mini';
const hello = [{ role: 'user', content: 'hello there' }];
// 60 words at 200 ms a token: the stream outlives the test's checks by far; the test aborts it.
const kLongText = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');

let server;
let client;

before(async () => {
    server = await startServer({ args: ['--max-concurrency', '1', '--model-name', kModel] });
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

test('--model-name: /v1/models lists it, the config name is unknown', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    assert.deepEqual(models, [kModel]);
    await expectApiError(() => client.chat.completions.create({ model: 'demo', messages: hello }), 404);
});

test('a second request while one streams is a 429; the slot returns after a disconnect', async () => {
    const controller = new AbortController();
    const stream = await client.chat.completions.create({
        model: kModel,
        messages: [{ role: 'user', content: kLongText }],
        stream: true,
        stage_params: { thinker: { token_delay_ms: 200 } },
    }, { signal: controller.signal });
    const iterator = stream[Symbol.asyncIterator]();
    try {
        const first = await iterator.next();
        assert.equal(first.done, false, 'the slow stream sends a first chunk');

        const chat = await expectApiError(
            () => client.chat.completions.create({ model: kModel, messages: hello }), 429);
        assert.ok(chat instanceof OpenAI.RateLimitError);
        await expectApiError(() => client.chat.completions.create({
            model: kModel, messages: hello, stream: true,
        }), 429);
        await expectApiError(() => client.audio.speech.create({
            model: kModel, voice: 'alloy', input: 'hi',
        }), 429);

        const health = await curl({ url: `${server.origin}/health` });
        assert.equal(health.status, 200, '/health is not a generation request');
        const models = await curl({ url: `${server.baseURL}/models` });
        assert.equal(models.status, 200, '/v1/models is not a generation request');

        const second = await iterator.next();
        assert.equal(second.done, false, 'the first stream is still going');
    } finally {
        controller.abort();
    }
    // openai's stream iterator ends quietly on an abort (or rejects with an abort error).
    await drainAborted(iterator);

    // The slot is released once the server notices the disconnect (asynchronously): poll.
    const completion = await pollUntil(async () => {
        try {
            return await client.chat.completions.create({ model: kModel, messages: hello });
        } catch (error) {
            if (error instanceof OpenAI.RateLimitError) return null;
            throw error;
        }
    }, { timeoutMs: 30_000, intervalMs: 100, what: 'a request admitted after the disconnect' });
    assert.equal(completion.choices[0].message.content, 'You said: hello there.');
});

test('after a stream that ends normally, the next request is admitted', async () => {
    const stream = await client.chat.completions.create({
        model: kModel, messages: hello, stream: true,
        stage_params: { thinker: { token_delay_ms: 20 } },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(text, 'You said: hello there.');
    const completion = await pollUntil(async () => {
        try {
            return await client.chat.completions.create({ model: kModel, messages: hello });
        } catch (error) {
            if (error instanceof OpenAI.RateLimitError) return null;
            throw error;
        }
    }, { timeoutMs: 30_000, intervalMs: 100, what: 'a request admitted after a finished stream' });
    assert.equal(completion.choices[0].message.content, 'You said: hello there.');
});
