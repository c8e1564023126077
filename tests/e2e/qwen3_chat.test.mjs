// configs/qwen3_chat.yaml's shape with a real model architecture: a generated tiny Qwen3
// checkpoint (random weights, the real tensor names), the Qwen3 plugin, the AR engine, behind
// `omnirt serve`, talked to with the openai client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import { omnirtBinary, startServer } from './server.mjs';
import { openaiClient } from './helpers.mjs';

const run = promisify(execFile);
const kModel = 'qwen3-chat';
const plugin = process.env.OMNIRT_QWEN3_PLUGIN ||
    path.join(path.dirname(omnirtBinary()), '..', 'lib', 'libomnirt_qwen3_plugin.so');

let dir;
let server;
let client;

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-qwen3-'));
    const checkpoint = path.join(dir, 'qwen3-tiny');
    await run(omnirtBinary(), ['make-checkpoint', '--arch', 'qwen3', '--preset', 'tiny', '--out',
                               checkpoint, '--quiet']);
    const config = path.join(dir, 'qwen3_chat.yaml');
    await writeFile(config, `name: ${kModel}
model_path: ${checkpoint}
plugins: [${plugin}]
stages:
  - {name: thinker, process: thinker, factory: qwen3.thinker,
     factory_args: {dtype: float32, max_total_tokens: 4096}, terminal: true}
`);
    server = await startServer({ args: ['--config', config] });
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

const request = (extra = {}) => ({
    model: kModel,
    messages: [{ role: 'user', content: 'Say something about C++.' }],
    max_tokens: 8,
    temperature: 0,
    ...extra,
});

test('the plugin was built next to the binary', () => {
    assert.ok(existsSync(plugin), `missing ${plugin}`);
});

test('greedy chat is deterministic and honours max_tokens', async () => {
    const first = await client.chat.completions.create(request());
    const second = await client.chat.completions.create(request());
    const choice = first.choices[0];
    assert.equal(typeof choice.message.content, 'string');
    assert.equal(choice.message.content, second.choices[0].message.content);
    assert.ok(first.usage.prompt_tokens > 5, JSON.stringify(first.usage));
    assert.ok(first.usage.completion_tokens >= 1 && first.usage.completion_tokens <= 8);
    if (choice.finish_reason === 'length') assert.equal(first.usage.completion_tokens, 8);
    else assert.equal(choice.finish_reason, 'stop');
});

test('streamed deltas join to the non-streamed answer', async () => {
    const whole = await client.chat.completions.create(request());
    const stream = await client.chat.completions.create(
        request({ stream: true, stream_options: { include_usage: true } }));
    let text = '';
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        text += choice.delta?.content ?? '';
        if (choice.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.deepEqual(usage, whole.usage);
});

test('seeded sampling is reproducible', async () => {
    const seeded = request({ temperature: 1.0, top_p: 0.9, seed: 1234, max_tokens: 12 });
    const a = await client.chat.completions.create(seeded);
    const b = await client.chat.completions.create(seeded);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('a bad sampling field is a 400 naming it', async () => {
    await assert.rejects(client.chat.completions.create(request({ top_p: 0 })), (error) => {
        assert.equal(error.status, 400);
        assert.equal(error.error?.param ?? error.param, 'top_p');
        return true;
    });
});
