// Qwen3-Omni understanding through `omnirt serve --config configs/qwen3_omni_thinker.yaml` on a
// generated tiny checkpoint (random weights, the real layout): chat requests with an image, an
// audio clip and a video (stream and not) through the openai client, and bad media answered with
// a 400 naming the content part. Random weights say nothing sensible, so the tests check what
// the pipeline must guarantee: the media reached the prompt (its token count), generation ran,
// the stream and the non-stream answers agree, errors are clear.
import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { omnirtBinary, repoRoot, startServer } from './server.mjs';
import { makeBmp as bmp, openaiClient, runProcess } from './helpers.mjs';

const kModel = 'qwen3-omni-thinker';

let dir;
let server;
let client;

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-omni-'));
    const made = await runProcess(omnirtBinary(), ['make-checkpoint', '--arch', 'qwen3_omni',
                                                   '--preset', 'tiny', '--quiet', '--out', dir]);
    assert.equal(made.code, 0, made.stderr);
    server = await startServer({
        args: ['--config', 'configs/qwen3_omni_thinker.yaml', '--model-path', dir,
               '--allow-remote-media'],
        startTimeoutMs: 120_000,
    });
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

function wav(seconds) {
    const samples = Math.round(seconds * 16000);
    const out = Buffer.alloc(44 + 2 * samples);
    out.write('RIFF', 0);
    out.writeUInt32LE(36 + 2 * samples, 4);
    out.write('WAVEfmt ', 8);
    out.writeUInt32LE(16, 16);
    out.writeUInt16LE(1, 20);
    out.writeUInt16LE(1, 22);
    out.writeUInt32LE(16000, 24);
    out.writeUInt32LE(32000, 28);
    out.writeUInt16LE(2, 32);
    out.writeUInt16LE(16, 34);
    out.write('data', 36);
    out.writeUInt32LE(2 * samples, 40);
    for (let i = 0; i < samples; ++i) out.writeInt16LE(Math.round(8000 * Math.sin(0.05 * i)), 44 + 2 * i);
    return out;
}

const image = (bytes) => ({
    type: 'image_url', image_url: { url: `data:image/bmp;base64,${bytes.toString('base64')}` },
});
const audio = (bytes) => ({ type: 'input_audio', input_audio: { data: bytes.toString('base64'), format: 'wav' } });

function request(content, extra = {}) {
    return { model: kModel, messages: [{ role: 'user', content }], max_tokens: 6, temperature: 0, ...extra };
}

async function collect(stream) {
    const out = { text: '', finish: null, usage: null, chunks: 0 };
    for await (const chunk of stream) {
        out.chunks += 1;
        if (chunk.usage) out.usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        out.text += choice.delta?.content ?? '';
        if (choice.finish_reason) out.finish = choice.finish_reason;
    }
    return out;
}

test('an image becomes its tokens in the prompt (100x70 -> 64x96 -> 6 tokens + 2 markers)', async () => {
    const text = await client.chat.completions.create(request([{ type: 'text', text: 'what is it?' }]));
    const withImage = await client.chat.completions.create(
        request([image(bmp(100, 70, 1)), { type: 'text', text: 'what is it?' }]));
    assert.equal(withImage.usage.prompt_tokens - text.usage.prompt_tokens, 8);
    assert.equal(withImage.usage.completion_tokens, 6);
    assert.equal(withImage.choices[0].finish_reason, 'length');
});

test('audio in (1.3 s -> 17 tokens + 2 markers), streamed and not, the same answer', async () => {
    const text = await client.chat.completions.create(request([{ type: 'text', text: 'listen' }]));
    const content = [audio(wav(1.3)), { type: 'text', text: 'listen' }];
    const whole = await client.chat.completions.create(request(content));
    assert.equal(whole.usage.prompt_tokens - text.usage.prompt_tokens, 19);
    const streamed = await collect(await client.chat.completions.create(
        request(content, { stream: true, stream_options: { include_usage: true } })));
    assert.equal(streamed.finish, whole.choices[0].finish_reason);
    assert.equal(streamed.text, whole.choices[0].message.content);
    assert.deepEqual(streamed.usage, whole.usage);
});

test('a video (mp4, H.264) streamed and not', async () => {
    const bytes = await readFile(path.join(repoRoot, 'tests/media/goldens/video_h264_aac.mp4'));
    const content = [{ type: 'video_url', video_url: { url: `data:video/mp4;base64,${bytes.toString('base64')}` } },
                     { type: 'text', text: 'what happens?' }];
    const whole = await client.chat.completions.create(request(content));
    assert.ok(whole.usage.prompt_tokens > 20, JSON.stringify(whole.usage));
    const streamed = await collect(await client.chat.completions.create(
        request(content, { stream: true, stream_options: { include_usage: true } })));
    assert.equal(streamed.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.equal(streamed.text, whole.choices[0].message.content);
});

test('several media parts and concurrent requests', async () => {
    const content = [image(bmp(64, 64, 2)), audio(wav(0.5)), image(bmp(96, 64, 3)),
                     { type: 'text', text: 'compare' }];
    const answers = await Promise.all([1, 2, 3, 4].map(() => client.chat.completions.create(request(content))));
    for (const answer of answers) {
        assert.equal(answer.usage.prompt_tokens, answers[0].usage.prompt_tokens);
        assert.equal(answer.choices[0].message.content, answers[0].choices[0].message.content);
    }
});

test('an http image URL is fetched (with --allow-remote-media); a dead one is a 400', async () => {
    const image = bmp(100, 70, 9);
    const origin = http.createServer((request, response) => {
        response.writeHead(200, { 'content-type': 'image/bmp', 'content-length': image.length });
        response.end(image);
    });
    await new Promise((resolve) => origin.listen(0, '127.0.0.1', resolve));
    try {
        const url = `http://127.0.0.1:${origin.address().port}/picture.bmp`;
        const text = await client.chat.completions.create(request([{ type: 'text', text: 'see' }]));
        const fetched = await client.chat.completions.create(
            request([{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'see' }]));
        assert.equal(fetched.usage.prompt_tokens - text.usage.prompt_tokens, 8);
    } finally {
        await new Promise((resolve) => origin.close(resolve));
    }
    await assert.rejects(
        client.chat.completions.create(request([{ type: 'image_url', image_url: { url: 'http://127.0.0.1:1/x.png' } }])),
        (error) => {
            assert.equal(error.status, 400, String(error));
            assert.match(error.message, /content\[0\] \(image\)/);
            return true;
        });
});

test('bad media gets a 400 naming the content part', async () => {
    const cases = [
        [[{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }],
         /content\[1\] \(image\)/],
        [[{ type: 'input_audio', input_audio: { data: Buffer.from('RIFF....').toString('base64'), format: 'wav' } }],
         /content\[0\] \(audio\)/],
        [[{ type: 'video_url', video_url: { url: 'data:video/mp4;base64,AAAAGGZ0eXA=' } }],
         /content\[0\] \(video\)/],
        [[image(bmp(402, 2, 4))], /content\[0\] \(image\)/],
    ];
    for (const [content, pattern] of cases) {
        await assert.rejects(client.chat.completions.create(request(content)), (error) => {
            assert.equal(error.status, 400, String(error));
            assert.match(error.message, pattern);
            return true;
        });
    }
    // The server keeps serving.
    const ok = await client.chat.completions.create(request([{ type: 'text', text: 'still there?' }]));
    assert.equal(ok.choices[0].finish_reason, 'length');
});
