// Errors in OpenAI's shape {"error": {message, type, param, code}}: API keys (401), unknown
// models and routes (404, 405), bad bodies (400 naming the field), bodies over the limit (413),
// and stage failures. The server runs with --api-key.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { startServer } from './server.mjs';
import { assertOpenAIError, curl, expectApiError, openaiClient } from './helpers.mjs';

const kModel = 'demo';
const kKey = 'sk-e2e-secret';
const hello = [{ role: 'user', content: 'hello there' }];
const kHugeBytes = 70 * 1024 * 1024;

let server;
let client;

before(async () => {
    server = await startServer({ args: ['--api-key', kKey] });
    client = openaiClient(server, { apiKey: kKey });
});

after(async () => {
    await server?.stop();
});

const auth = { Authorization: `Bearer ${kKey}` };
const json = { 'Content-Type': 'application/json' };

async function postChat(body, headers = { ...auth, ...json }) {
    return curl({ method: 'POST', url: `${server.baseURL}/chat/completions`, headers, body });
}

// A chat body of `bytes` bytes: one user message of 'a's.
function hugeChatBody(bytes) {
    const head = Buffer.from(`{"model":"${kModel}","messages":[{"role":"user","content":"`);
    const tail = Buffer.from('"}]}');
    const body = Buffer.alloc(bytes, 'a');
    head.copy(body, 0);
    tail.copy(body, bytes - tail.length);
    return body;
}

describe('API key', () => {
    test('the right key is accepted', async () => {
        const completion = await client.chat.completions.create({ model: kModel, messages: hello });
        assert.equal(completion.choices[0].message.content, 'You said: hello there.');
    });

    test('a wrong key is a 401', async () => {
        const wrong = openaiClient(server, { apiKey: 'sk-wrong' });
        await expectApiError(() => wrong.chat.completions.create({ model: kModel, messages: hello }), 401);
        await expectApiError(() => wrong.models.list(), 401);
        await expectApiError(() => wrong.audio.speech.create({
            model: kModel, voice: 'alloy', input: 'hi',
        }), 401);
    });

    test('a missing key is a 401', async () => {
        const response = await postChat(JSON.stringify({ model: kModel, messages: hello }), json);
        assert.equal(response.status, 401);
        assertOpenAIError(response.body);
        const models = await curl({ url: `${server.baseURL}/models` });
        assert.equal(models.status, 401);
        assertOpenAIError(models.body);
    });

    test('/health and the playground page need no key; the voices do', async () => {
        for (const route of ['/health', '/', '/playground/app.js']) {
            const response = await curl({ url: `${server.origin}${route}` });
            assert.equal(response.status, 200, route);
        }
        const voices = await curl({ url: `${server.baseURL}/audio/voices` });
        assert.equal(voices.status, 401);
        assertOpenAIError(voices.body);
        const keyed = await curl({ url: `${server.baseURL}/audio/voices`,
                                   headers: { Authorization: `Bearer ${kKey}` } });
        assert.equal(keyed.status, 200);
    });
});

describe('not found', () => {
    test('an unknown model is a 404', async () => {
        await expectApiError(() => client.chat.completions.create({ model: 'gpt-nope', messages: hello }), 404);
        await expectApiError(() => client.audio.speech.create({
            model: 'gpt-nope', voice: 'alloy', input: 'hi',
        }), 404);
    });

    test('an unknown route is a 404 in the OpenAI shape', async () => {
        for (const [method, url] of [['GET', `${server.baseURL}/nope`], ['POST', `${server.origin}/nope`]]) {
            const response = await curl({ method, url, headers: auth });
            assert.equal(response.status, 404, `${method} ${url}`);
            assertOpenAIError(response.body);
        }
    });

    test('a known route with the wrong method is a 405', async () => {
        const response = await curl({ url: `${server.baseURL}/chat/completions`, headers: auth });
        assert.equal(response.status, 405);
        assertOpenAIError(response.body);
    });
});

describe('bad requests', () => {
    test('invalid JSON is a 400', async () => {
        for (const body of ['{"model": "demo", "messages": [', '', 'not json', '[1, 2]']) {
            const response = await postChat(body);
            assert.equal(response.status, 400, `body ${JSON.stringify(body)}`);
            assertOpenAIError(response.body);
        }
    });

    test('temperature 5 is a 400 on temperature', async () => {
        const error = await expectApiError(() => client.chat.completions.create({
            model: kModel, messages: hello, temperature: 5,
        }), 400);
        assert.equal(error.param, 'temperature');
    });

    test('n 2 is a 400 on n', async () => {
        const error = await expectApiError(() => client.chat.completions.create({
            model: kModel, messages: hello, n: 2,
        }), 400);
        assert.equal(error.param, 'n');
    });

    test('other fields: a 400 naming each', async () => {
        const cases = [
            [{ model: kModel, messages: hello, max_tokens: 0 }, 'max_tokens'],
            [{ model: kModel }, 'messages'],
            [{ model: kModel, messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
            [{ model: kModel, messages: hello, top_p: 0 }, 'top_p'],
            [{ model: kModel, messages: hello, stream_options: { include_usage: true } }, 'stream_options'],
        ];
        for (const [body, param] of cases) {
            const response = await postChat(JSON.stringify(body));
            assert.equal(response.status, 400, JSON.stringify(body));
            assertOpenAIError(response.body, { param });
        }
    });

    test('a stage rejecting its parameters is a 400 naming the parameter', async () => {
        const error = await expectApiError(() => client.chat.completions.create({
            model: kModel, messages: hello, stage_params: { thinker: { token_delay_ms: '5' } },
        }), 400);
        assert.match(error.message, /token_delay_ms/);
    });
});

describe('body too large', () => {
    test('70 MB through curl is a 413', async () => {
        const response = await postChat(hugeChatBody(kHugeBytes));
        assert.equal(response.status, 413);
        assertOpenAIError(response.body);
    });

    test('70 MB through the openai client (no Expect: 100-continue) is a 413', async () => {
        await expectApiError(() => client.chat.completions.create({
            model: kModel, messages: [{ role: 'user', content: 'a'.repeat(kHugeBytes) }],
        }), 413);
    });

    test('the server still answers afterwards', async () => {
        const completion = await client.chat.completions.create({ model: kModel, messages: hello });
        assert.equal(completion.choices[0].message.content, 'You said: hello there.');
    });
});
