// Chat completions with text output: non-streaming, streaming (openai's iterator and raw SSE
// through curl), the demo thinker's reply rules (max_tokens, stop, temperature + seed) and media
// parts (data URLs, and local files under --allowed-media-dir).
import assert from 'node:assert/strict';
import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { startServer } from './server.mjs';
import {
    assertOpenAIError, curl, expectApiError, makeWav, mediaType, openaiClient, sseData,
} from './helpers.mjs';

const kModel = 'demo';
// A 1x1 PNG.
const kPng = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    'base64');

let server;
let client;
let mediaDir;

before(async () => {
    mediaDir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-media-')));
    await writeFile(path.join(mediaDir, 'pixel.png'), kPng);
    server = await startServer({ args: ['--allowed-media-dir', mediaDir] });
    client = openaiClient(server);
});

after(async () => {
    try {
        await server?.stop();
    } finally {
        if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
    }
});

const hello = [{ role: 'user', content: 'hello there' }];

describe('chat, non-streaming', () => {
    test('replies "You said: <text>." with usage and finish_reason stop', async () => {
        const completion = await client.chat.completions.create({ model: kModel, messages: hello });
        assert.equal(completion.object, 'chat.completion');
        assert.match(completion.id, /^chatcmpl-/);
        assert.equal(completion.model, kModel);
        assert.equal(typeof completion.created, 'number');
        assert.equal(completion.choices.length, 1);
        const [choice] = completion.choices;
        assert.equal(choice.index, 0);
        assert.equal(choice.message.role, 'assistant');
        assert.equal(choice.message.content, 'You said: hello there.');
        assert.equal(choice.finish_reason, 'stop');
        // Prompt: 2 words; completion: "You ", "said: ", "hello ", "there.".
        assert.deepEqual(
            { prompt: completion.usage.prompt_tokens, completion: completion.usage.completion_tokens,
              total: completion.usage.total_tokens },
            { prompt: 2, completion: 4, total: 6 });
    });

    test('answers the last user message; usage counts every message', async () => {
        const completion = await client.chat.completions.create({
            model: kModel,
            messages: [
                { role: 'system', content: 'be brief' },
                { role: 'user', content: 'first' },
                { role: 'assistant', content: 'ok' },
                { role: 'user', content: [{ type: 'text', text: 'hello' }, { type: 'text', text: 'there' }] },
            ],
        });
        assert.equal(completion.choices[0].message.content, 'You said: hello there.');
        assert.equal(completion.usage.prompt_tokens, 6);
    });

    test('max_tokens cuts the reply: finish_reason length', async () => {
        const completion = await client.chat.completions.create({
            model: kModel, messages: hello, max_tokens: 2,
        });
        assert.equal(completion.choices[0].message.content, 'You said:');
        assert.equal(completion.choices[0].finish_reason, 'length');
        assert.equal(completion.usage.completion_tokens, 2);
        const newer = await client.chat.completions.create({
            model: kModel, messages: hello, max_completion_tokens: 3,
        });
        assert.equal(newer.choices[0].message.content, 'You said: hello');
        assert.equal(newer.choices[0].finish_reason, 'length');
    });

    test('stop strings cut the reply: finish_reason stop', async () => {
        const completion = await client.chat.completions.create({
            model: kModel, messages: hello, stop: ['hello'],
        });
        assert.equal(completion.choices[0].message.content, 'You said: ');
        assert.equal(completion.choices[0].finish_reason, 'stop');
    });

    test('temperature + seed: the same seed gives the same text', async () => {
        const reply = async (seed) => (await client.chat.completions.create({
            model: kModel, messages: hello, temperature: 0.8, seed,
        })).choices[0].message.content;
        const first = await reply(42);
        assert.equal(await reply(42), first);
        assert.ok(first.startsWith('You said: hello there. '), first);
        const extra = first.slice('You said: hello there. '.length).split(' ');
        assert.ok(extra.length >= 3 && extra.length <= 6, `3 to 6 sampled words: ${first}`);
        const others = new Set();
        for (const seed of [1, 2, 3, 4, 5]) others.add(await reply(seed));
        assert.ok(others.size > 1, 'different seeds give different texts');
        const greedy = await client.chat.completions.create({
            model: kModel, messages: hello, temperature: 0, seed: 42,
        });
        assert.equal(greedy.choices[0].message.content, 'You said: hello there.');
    });
});

describe('chat, streaming', () => {
    test('the deltas concatenate to the reply; the last chunk has finish_reason', async () => {
        const stream = await client.chat.completions.create({
            model: kModel, messages: hello, stream: true,
        });
        const chunks = [];
        for await (const chunk of stream) chunks.push(chunk);
        assert.ok(chunks.length >= 2, `chunks: ${chunks.length}`);
        for (const chunk of chunks) {
            assert.equal(chunk.object, 'chat.completion.chunk');
            assert.equal(chunk.id, chunks[0].id);
            assert.equal(chunk.model, kModel);
            assert.ok(chunk.usage === undefined || chunk.usage === null, 'no usage without include_usage');
        }
        assert.match(chunks[0].id, /^chatcmpl-/);
        assert.equal(chunks[0].choices[0].delta.role, 'assistant');
        const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
        assert.equal(text, 'You said: hello there.');
        const words = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').filter((t) => t !== '');
        assert.deepEqual(words, ['You ', 'said: ', 'hello ', 'there.'], 'one word per chunk');
        const finishes = chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
        assert.equal(finishes.length, 1, 'exactly one chunk carries finish_reason');
        assert.equal(finishes[0], chunks.at(-1), 'the last chunk carries finish_reason');
        assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
    });

    test('max_tokens while streaming: finish_reason length', async () => {
        const stream = await client.chat.completions.create({
            model: kModel, messages: hello, stream: true, max_tokens: 2,
        });
        const chunks = [];
        for await (const chunk of stream) chunks.push(chunk);
        const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
        assert.equal(text, 'You said:');
        assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
    });

    test('stream_options.include_usage: a final usage chunk', async () => {
        const stream = await client.chat.completions.create({
            model: kModel, messages: hello, stream: true, stream_options: { include_usage: true },
        });
        const chunks = [];
        for await (const chunk of stream) chunks.push(chunk);
        const last = chunks.at(-1);
        assert.deepEqual(last.choices, [], 'the usage chunk has no choices');
        assert.equal(last.usage.prompt_tokens, 2);
        assert.equal(last.usage.completion_tokens, 4);
        assert.equal(last.usage.total_tokens, 6);
        for (const chunk of chunks.slice(0, -1)) {
            assert.equal(chunk.usage, null, 'the other chunks carry usage: null');
        }
        assert.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
        const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
        assert.equal(text, 'You said: hello there.');
    });

    test('raw SSE (curl): JSON events, then data: [DONE]', async () => {
        const response = await curl({
            method: 'POST',
            url: `${server.baseURL}/chat/completions`,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ model: kModel, messages: hello, stream: true }),
            extraArgs: ['-N'],
        });
        assert.equal(response.status, 200);
        assert.equal(mediaType(response.headers['content-type']), 'text/event-stream');
        const text = response.body.toString('utf8');
        const events = sseData(text);
        assert.equal(events.at(-1), '[DONE]', `the stream ends with data: [DONE]:\n${text}`);
        assert.ok(text.trimEnd().endsWith('data: [DONE]'), text);
        assert.equal(events.filter((event) => event === '[DONE]').length, 1);
        const chunks = events.slice(0, -1).map((event) => JSON.parse(event));
        const reply = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
        assert.equal(reply, 'You said: hello there.');
    });
});

describe('chat, media parts', () => {
    test('data URLs: an image and an input_audio clip are counted', async () => {
        const completion = await client.chat.completions.create({
            model: kModel,
            messages: [{
                role: 'user',
                content: [
                    { type: 'text', text: 'describe these' },
                    { type: 'image_url', image_url: { url: `data:image/png;base64,${kPng.toString('base64')}` } },
                    { type: 'input_audio', input_audio: { data: makeWav().toString('base64'), format: 'wav' } },
                ],
            }],
        });
        assert.equal(completion.choices[0].message.content,
                     'You said: describe these. (1 image, 1 audio clip)');
        assert.equal(completion.usage.prompt_tokens, 2);
    });

    test('a local file under --allowed-media-dir is accepted', async () => {
        const completion = await client.chat.completions.create({
            model: kModel,
            messages: [{
                role: 'user',
                content: [
                    { type: 'text', text: 'what is this' },
                    { type: 'image_url', image_url: { url: path.join(mediaDir, 'pixel.png') } },
                ],
            }],
        });
        assert.equal(completion.choices[0].message.content, 'You said: what is this. (1 image)');
    });

    test('a local file outside --allowed-media-dir is a 400 naming the url', async () => {
        const error = await expectApiError(() => client.chat.completions.create({
            model: kModel,
            messages: [{
                role: 'user',
                content: [
                    { type: 'text', text: 'what is this' },
                    { type: 'image_url', image_url: { url: path.join(os.tmpdir(), '..', 'etc', 'hostname') } },
                ],
            }],
        }), 400);
        assert.equal(error.param, 'messages[0].content[1].image_url.url');
    });

    test('a bad data URL payload is a 400 naming the field', async () => {
        const response = await curl({
            method: 'POST',
            url: `${server.baseURL}/chat/completions`,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
                model: kModel,
                messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,@@@@' } }] }],
            }),
        });
        assert.equal(response.status, 400);
        assertOpenAIError(response.body, { param: 'messages[0].content[0].image_url.url' });
    });
});
