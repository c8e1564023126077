// What `omnirt serve --model-path DIR` runs for a Qwen3 checkpoint (the family is detected from
// its config.json): the three-stage Qwen3 chat pipeline (preprocess -> thinker -> decode) on a
// generated tiny checkpoint (random weights, the real tensor names), the thinker from the Qwen3
// plugin on the AR engine. Talked to with the
// openai client (chat and completions) and fetch (/tokenize, /detokenize, /health).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { omnirtBinary, startServer } from './server.mjs';
import { kRequestTimeoutMs, openaiClient, runProcess } from './helpers.mjs';

const kModel = 'qwen3-chat';
const plugin = process.env.OMNIRT_QWEN3_PLUGIN ||
    path.join(path.dirname(omnirtBinary()), '..', 'lib', 'libomnirt_qwen3_plugin.so');

let cacheDir;
let server;
let client;

before(async () => {
    cacheDir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-qwen3-'));
    const made = await runProcess(omnirtBinary(), ['make-checkpoint', '--arch', 'qwen3', '--preset',
                                                   'tiny', '--quiet', '--out', cacheDir]);
    assert.equal(made.code, 0, made.stderr);
    server = await startServer({ pipeline: 'default', args: ['--model-path', cacheDir] });
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

async function post(route, body) {
    const response = await fetch(`${server.origin}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(kRequestTimeoutMs),
    });
    return { status: response.status, body: await response.json() };
}

const chat = (extra = {}) => ({
    model: kModel,
    messages: [{ role: 'user', content: 'Say something about C++.' }],
    max_tokens: 8,
    temperature: 0,
    ...extra,
});

const completion = (extra = {}) => ({
    model: kModel,
    prompt: 'The quick brown fox',
    max_tokens: 10,
    temperature: 0,
    ...extra,
});

async function collectChat(stream) {
    const out = { text: '', finish: null, usage: null, logprobs: [] };
    for await (const chunk of stream) {
        if (chunk.usage) out.usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        out.text += choice.delta?.content ?? '';
        out.logprobs.push(...(choice.logprobs?.content ?? []));
        if (choice.finish_reason) out.finish = choice.finish_reason;
    }
    return out;
}

test('the family pipeline: the plugin next to the binary, the checkpoint given', async () => {
    assert.ok(existsSync(plugin), `missing ${plugin}`);
    assert.ok(existsSync(path.join(cacheDir, 'model.safetensors')));
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [kModel]);
    const health = await fetch(`${server.origin}/health`).then((r) => r.json());
    assert.deepEqual(health.stages.map((s) => s.name).sort(), ['decode', 'preprocess', 'thinker']);
});

test('greedy chat is deterministic and honours max_tokens', async () => {
    const first = await client.chat.completions.create(chat());
    const second = await client.chat.completions.create(chat());
    const choice = first.choices[0];
    assert.equal(typeof choice.message.content, 'string');
    assert.equal(choice.message.content, second.choices[0].message.content);
    assert.equal(choice.logprobs, null);
    assert.ok(first.usage.prompt_tokens > 5, JSON.stringify(first.usage));
    assert.ok(first.usage.completion_tokens >= 1 && first.usage.completion_tokens <= 8);
    if (choice.finish_reason === 'length') assert.equal(first.usage.completion_tokens, 8);
    else assert.equal(choice.finish_reason, 'stop');
});

test('streamed chat deltas join to the non-streamed answer', async () => {
    const whole = await client.chat.completions.create(chat());
    const streamed = await collectChat(await client.chat.completions.create(
        chat({ stream: true, stream_options: { include_usage: true } })));
    assert.equal(streamed.text, whole.choices[0].message.content);
    assert.equal(streamed.finish, whole.choices[0].finish_reason);
    assert.deepEqual(streamed.usage, whole.usage);
});

test('chat logprobs: one entry per token, greedy picks the top alternative', async () => {
    const answer = await client.chat.completions.create(
        chat({ logprobs: true, top_logprobs: 3 }));
    const entries = answer.choices[0].logprobs.content;
    assert.equal(entries.length, answer.usage.completion_tokens);
    for (const entry of entries) {
        assert.ok(entry.logprob <= 0, JSON.stringify(entry));
        assert.equal(entry.top_logprobs.length, 3);
        assert.equal(entry.top_logprobs[0].token, entry.token);
        assert.ok(Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-4);
        for (let i = 1; i < 3; ++i) {
            assert.ok(entry.top_logprobs[i].logprob <= entry.top_logprobs[i - 1].logprob);
        }
        assert.equal(Buffer.from(entry.bytes).length, entry.bytes.length);
    }
    const streamed = await collectChat(await client.chat.completions.create(
        chat({ logprobs: true, top_logprobs: 3, stream: true })));
    assert.deepEqual(streamed.logprobs.map((e) => e.token), entries.map((e) => e.token));
    // top_logprobs without logprobs is refused, as by OpenAI.
    await assert.rejects(client.chat.completions.create(chat({ top_logprobs: 2 })),
        (error) => error.status === 400 && (error.error?.param ?? error.param) === 'top_logprobs');
});

test('seeded sampling is reproducible', async () => {
    const seeded = chat({ temperature: 1.0, top_p: 0.9, seed: 1234, max_tokens: 12 });
    const a = await client.chat.completions.create(seeded);
    const b = await client.chat.completions.create(seeded);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('a bad sampling field is a 400 naming it', async () => {
    await assert.rejects(client.chat.completions.create(chat({ top_p: 0 })), (error) => {
        assert.equal(error.status, 400);
        assert.equal(error.error?.param ?? error.param, 'top_p');
        return true;
    });
});

test('completions: a text prompt and its token ids give the same greedy text', async () => {
    const byText = await client.completions.create(completion());
    assert.equal(byText.object, 'text_completion');
    assert.match(byText.id, /^cmpl-/);
    const ids = await post('/tokenize', { model: kModel, prompt: 'The quick brown fox' });
    assert.equal(ids.status, 200);
    assert.equal(byText.usage.prompt_tokens, ids.body.count);
    const byIds = await client.completions.create(completion({ prompt: ids.body.tokens }));
    assert.equal(byIds.choices[0].text, byText.choices[0].text);
    assert.equal(byText.usage.completion_tokens <= 10, true);
});

test('completions: streamed text and logprobs join to the non-streamed answer', async () => {
    const whole = await client.completions.create(completion({ logprobs: 2 }));
    const logprobs = whole.choices[0].logprobs;
    assert.equal(logprobs.tokens.length, whole.usage.completion_tokens);
    assert.equal(logprobs.token_logprobs.length, logprobs.tokens.length);
    assert.equal(logprobs.text_offset[0], 0);
    for (let i = 1; i < logprobs.tokens.length; ++i) {
        assert.equal(logprobs.text_offset[i],
                     logprobs.text_offset[i - 1] + [...logprobs.tokens[i - 1]].length);
    }
    for (const top of logprobs.top_logprobs) assert.ok(Object.keys(top).length >= 1);
    const stream = await client.completions.create(
        completion({ logprobs: 2, stream: true, stream_options: { include_usage: true } }));
    let text = '';
    let tokens = [];
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        text += choice.text;
        tokens.push(...(choice.logprobs?.tokens ?? []));
        if (choice.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(text, whole.choices[0].text);
    assert.deepEqual(tokens, logprobs.tokens);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.deepEqual(usage, whole.usage);
});

test('a stop string ends the text right before it', async () => {
    // Seeded sampling: the same tokens every time, and more varied than greedy output.
    const seeded = { max_tokens: 32, temperature: 1, seed: 7 };
    const whole = await client.completions.create(completion(seeded));
    const text = whole.choices[0].text;
    // A stop string of two printable ASCII characters from the middle of the output.
    let at = -1;
    for (let i = 2; i + 2 <= text.length && at < 0; ++i) {
        if (/^[\x21-\x7e]{2}$/.test(text.slice(i, i + 2))) at = i;
    }
    assert.ok(at > 0, `no ASCII pair in ${JSON.stringify(text)}`);
    const stop = text.slice(at, at + 2);
    const cut = await client.completions.create(completion({ ...seeded, stop: [stop] }));
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, 'stop');
});

test('completions refuse what they do not implement, naming the field', async () => {
    for (const [extra, param] of [[{ prompt: ['a', 'b'] }, 'prompt'], [{ n: 2 }, 'n'],
                                  [{ echo: true }, 'echo'], [{ logprobs: 21 }, 'logprobs'],
                                  [{ prompt: [1, -1] }, 'prompt[1]'], [{ prompt: '' }, 'prompt']]) {
        await assert.rejects(client.completions.create(completion(extra)), (error) => {
            assert.equal(error.status, 400, JSON.stringify(extra));
            assert.equal(error.error?.param ?? error.param, param);
            return true;
        });
    }
    // An id past the vocabulary is the preprocessing stage's 400.
    await assert.rejects(client.completions.create(completion({ prompt: [1, 10_000_000] })),
        (error) => error.status === 400 && /inputs\.prompt\[1\]/.test(error.message));
});

test('tokenize and detokenize round-trip; chat messages count like the chat prompt', async () => {
    const text = 'Hello, world! Ünïcödé and emoji 🎉';
    const tokens = await post('/tokenize', { prompt: text, return_token_strs: true });
    assert.equal(tokens.status, 200);
    assert.equal(tokens.body.count, tokens.body.tokens.length);
    assert.equal(tokens.body.token_strs.length, tokens.body.count);
    assert.ok(tokens.body.max_model_len > 0);
    const back = await post('/detokenize', { tokens: tokens.body.tokens });
    assert.deepEqual(back, { status: 200, body: { prompt: text } });

    const messages = chat().messages;
    const rendered = await post('/tokenize', { model: kModel, messages });
    const answer = await client.chat.completions.create(chat({ max_tokens: 1 }));
    assert.equal(rendered.body.count, answer.usage.prompt_tokens);

    const llama = await post('/tokenize', { content: text });
    assert.deepEqual(llama.body.tokens, tokens.body.tokens);
});

test('tokenize and detokenize errors are 400s naming the field', async () => {
    for (const [route, body, param] of [
        ['/tokenize', {}, 'prompt'],
        ['/tokenize', { prompt: 'a', messages: [{ role: 'user', content: 'b' }] }, 'messages'],
        ['/tokenize', { prompt: 5 }, 'prompt'],
        ['/detokenize', {}, 'tokens'],
        ['/detokenize', { tokens: [1, 'x'] }, 'tokens[1]'],
        ['/detokenize', { tokens: [1, 50_000_000] }, 'tokens[1]'],
    ]) {
        const answer = await post(route, body);
        assert.equal(answer.status, 400, `${route} ${JSON.stringify(body)}`);
        assert.equal(answer.body.error.param, param, JSON.stringify(answer.body));
    }
    const wrongModel = await post('/tokenize', { model: 'other', prompt: 'x' });
    assert.equal(wrongModel.status, 404);
});
