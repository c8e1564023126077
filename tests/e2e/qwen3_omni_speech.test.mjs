// Qwen3-Omni with speech out through `omnirt serve` without arguments (what `make serve` runs: the
// speech pipeline, configs/qwen3_omni_speech.yaml, on the tiny checkpoint it generates into its
// cache; random weights, the real layout): chat completions with
// modalities ["text", "audio"] through the openai client answer with text and a playable audio
// file, stream and not. Random weights rarely say the codec's EOS, so each request caps the
// talker's frames (stage_sampling.talker.max_tokens) and asks for greedy decoding everywhere;
// the audio then has an exact length: the code2wav stage decodes chunks of 10, then 25 new
// frames, each call 1920 samples per frame minus 555 (docs/models/qwen3_omni.md).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startServer } from './server.mjs';
import {
    decodeBase64, drainAborted, expectApiError, kSampleRate, makeBmp, openaiClient, parseWav,
    pcm16Samples, pipelineState, pollUntil, waitUntilIdle,
} from './helpers.mjs';

const kModel = 'qwen3-omni-speech';
const kFrames = 12;
// Chunks of the code2wav stage for 12 frames: 10 + 2 new frames.
const kSamples = 1920 * kFrames - 555 * 2;
const hello = [{ role: 'user', content: 'hello there' }];
const greedy = {
    temperature: 0,
    max_tokens: 6,
    stage_sampling: { talker: { temperature: 0, max_tokens: kFrames } },
};

let dir;
let server;
let client;

before(async () => {
    // A private cache: the server generates the tiny checkpoint there on first use.
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-speech-'));
    server = await startServer({
        pipeline: 'default', env: { OMNIRT_CACHE_DIR: dir }, startTimeoutMs: 120_000,
    });
    client = openaiClient(server);
});

test('the default pipeline: the speech stages, the tiny checkpoint in the cache', async () => {
    assert.ok(existsSync(path.join(dir, 'qwen3-omni-tiny-v1', 'config.json')));
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [kModel]);
    const health = await fetch(`${server.origin}/health`).then((r) => r.json());
    assert.deepEqual(health.stages.map((s) => s.name).sort(),
                     ['audio_encoder', 'code2wav', 'decode', 'image_encoder', 'mm_aggregate',
                      'preprocessing', 'talker', 'thinker']);
});

after(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

function speak(audio, extra = {}) {
    return client.chat.completions.create({
        model: kModel, messages: hello, modalities: ['text', 'audio'], audio, ...greedy, ...extra,
    });
}

test('non-streaming: message.audio is a 24 kHz mono WAV of the talker frames', async () => {
    const completion = await speak({ voice: 'Ethan', format: 'wav' });
    const { message } = completion.choices[0];
    assert.ok(message.audio, 'message.audio is present');
    assert.match(message.audio.id, /^audio_/);
    assert.ok(Number.isInteger(message.audio.expires_at));
    assert.equal(message.audio.transcript, message.content ?? message.audio.transcript);
    const wav = parseWav(decodeBase64(message.audio.data, 'message.audio.data'));
    assert.equal(wav.channels, 1);
    assert.equal(wav.sampleRate, kSampleRate);
    assert.equal(wav.bitsPerSample, 16);
    assert.equal(wav.data.length / 2, kSamples, 'frames x 1920 samples less 555 per chunk');
    assert.ok(completion.usage.completion_tokens > 0);
});

test('streaming: delta.audio chunks concatenate to the non-streamed audio', async () => {
    const whole = await speak({ voice: 'chelsie', format: 'pcm16' });
    const expected = pcm16Samples(decodeBase64(whole.choices[0].message.audio.data));
    const stream = await speak({ voice: 'chelsie', format: 'pcm16' }, { stream: true });
    let text = '';
    const parts = [];
    for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta ?? {};
        text += delta.content ?? '';
        if (delta.audio?.data) parts.push(decodeBase64(delta.audio.data, 'delta.audio.data'));
    }
    assert.ok(parts.length >= 2, `audio arrives in several chunks, got ${parts.length}`);
    const samples = pcm16Samples(Buffer.concat(parts));
    assert.equal(samples.length, kSamples);
    assert.deepEqual(samples, expected);
    assert.equal(text, whole.choices[0].message.content);
});

// An image in the prompt: the thinker streams the image rows' hidden states to the talker.
test('an image prompt answers with speech of the same rule', async () => {
    const url = `data:image/bmp;base64,${makeBmp(64, 48, 5).toString('base64')}`;
    const completion = await client.chat.completions.create({
        model: kModel,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } },
                                             { type: 'text', text: 'what is this?' }] }],
        modalities: ['text', 'audio'], audio: { voice: 'aiden', format: 'wav' }, ...greedy,
    });
    assert.ok(completion.usage.prompt_tokens > 12, JSON.stringify(completion.usage));
    const wav = parseWav(decodeBase64(completion.choices[0].message.audio.data));
    assert.equal(wav.data.length / 2, kSamples);
});

test('text only: no audio and no talker', async () => {
    const completion = await client.chat.completions.create({
        model: kModel, messages: hello, ...greedy,
    });
    assert.equal(completion.choices[0].message.audio, undefined);
    assert.ok(completion.choices[0].message.content.length >= 0);
});

test('GET /v1/audio/voices lists the talker\'s speakers', async () => {
    const response = await fetch(`${server.origin}/v1/audio/voices`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), {
        voices: ['aiden', 'chelsie', 'ethan'].map((id) => ({ id, name: id, kind: 'preset' })),
    });
});

test('an unknown voice is a 400 naming the voices', async () => {
    const error = await expectApiError(() => speak({ voice: 'nobody', format: 'wav' }), 400);
    assert.match(error.message, /unknown voice 'nobody'.*ethan/);
});

// Qwen3-Omni answers conversations; it does not read a text aloud. /v1/audio/speech is a 400 that
// says so and names the chat route (not a stage's internal message).
test('POST /v1/audio/speech is a 400 naming the chat route', async () => {
    const response = await fetch(`${server.origin}/v1/audio/speech`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: kModel, input: 'read this', voice: 'ethan' }),
    });
    assert.equal(response.status, 400);
    const body = await response.json();
    assert.match(body.error.message, /does not read a text aloud.*\/v1\/chat\/completions/);
});

// A client that leaves mid-speech aborts the request in the thinker, the talker (its KV blocks)
// and code2wav (its stream state): every stage lets go, and the server answers the next request.
test('a disconnect mid-speech frees every stage', async () => {
    const before = await waitUntilIdle(server);
    const stream = await speak({ voice: 'ethan', format: 'pcm16' }, {
        stream: true, stage_sampling: { talker: { temperature: 0, max_tokens: 4000 } },
    });
    const iterator = stream[Symbol.asyncIterator]();
    try {
        for (;;) {
            const { value, done } = await iterator.next();
            assert.equal(done, false, 'the stream ended before its first audio');
            const data = value.choices[0]?.delta?.audio?.data;
            if (data && decodeBase64(data).length > 0) break;
        }
        // The gauges come with the stages' heartbeats: wait until one shows the request.
        await pollUntil(async () => {
            const { active } = await pipelineState(server);
            return active.talker >= 1 || active.code2wav >= 1;
        }, { timeoutMs: 30_000, what: 'the talker or code2wav holds the streaming request' });
    } finally {
        stream.controller.abort();  // the client goes away
    }
    await drainAborted(iterator);
    const after = await waitUntilIdle(server);
    assert.ok(after.aborted >= before.aborted + 1,
              `the coordinator counted the abort (${before.aborted} -> ${after.aborted})`);
    const again = await speak({ voice: 'ethan', format: 'wav' });
    assert.ok(again.choices[0].message.audio, 'the next request is answered');
});
