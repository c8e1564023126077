// Fish Audio S2-Pro behind POST /v1/audio/speech: `omnirt serve --model-path DIR` on a generated
// tiny S2-Pro checkpoint (the family's TTS pipeline: preprocess -> AR -> streaming vocoder),
// without a reference, with reference audio (base64, a data: URL, the legacy ref_audio /
// ref_text, a path in the allowed media directory), with reference codes and with saved voices
// (--voices-dir); `speed` time-stretches keeping the length exact; every response_format decodes
// (ffprobe) as a file, over SSE and as a raw stream; malformed input is a 400 naming the field;
// the openai client and curl, with and without a reference, whole and streamed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { omnirtBinary, startServer } from './server.mjs';
import { assertOpenAIError, curl, decodeBase64, kRequestTimeoutMs, makeWav, openaiClient,
         parseWav, runProcess, sseData } from './helpers.mjs';

let dir;
let mediaDir;
let voicesDir;
let server;
let modelId;
const voice = makeWav({ sampleRate: 16_000, seconds: 0.2, hz: 220 });
const kCodes = Array.from({ length: 10 }, (_, k) => [k, k + 1, k + 2]);

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-s2-'));
    mediaDir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-s2-media-'));
    await writeFile(path.join(mediaDir, 'voice.wav'), voice);
    voicesDir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-s2-voices-'));
    await writeFile(path.join(voicesDir, 'alice.wav'), voice);
    await writeFile(path.join(voicesDir, 'alice.txt'), 'A voice.');
    await writeFile(path.join(voicesDir, 'bob.codes.json'), JSON.stringify(kCodes));
    await writeFile(path.join(voicesDir, 'bob.txt'), 'A reference.');
    await writeFile(path.join(voicesDir, 'README.md'), 'not a voice');
    const made = await runProcess(omnirtBinary(), ['make-checkpoint', '--arch', 's2_pro', '--preset',
                                                   'tiny', '--quiet', '--out', dir]);
    assert.equal(made.code, 0, made.stderr);
    server = await startServer({ pipeline: 'default',
                                 args: ['--model-path', dir, '--allowed-media-dir', mediaDir,
                                        '--voices-dir', voicesDir] });
    const models = await (await fetch(`${server.origin}/v1/models`)).json();
    modelId = models.data[0].id;
});

after(async () => {
    await server?.stop();
    for (const d of [dir, mediaDir, voicesDir]) if (d) await rm(d, { recursive: true, force: true });
});

async function speech(extra) {
    const response = await fetch(`${server.origin}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: modelId, input: 'Hello there.', max_tokens: 4, seed: 3,
                               response_format: 'wav', ...extra }),
        signal: AbortSignal.timeout(kRequestTimeoutMs),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    return { status: response.status, bytes, headers: response.headers };
}

function expectAudio({ status, bytes }, what) {
    assert.equal(status, 200, `${what}: ${bytes.toString('utf8', 0, 400)}`);
    const wav = parseWav(bytes);
    assert.equal(wav.sampleRate, 44_100, what);
    assert.ok(wav.data.length > 0, `${what}: no samples`);
    return wav;
}

test('without a reference: 44.1 kHz audio', async () => {
    expectAudio(await speech({}), 'plain');
});

test('reference audio as base64, a data: URL, ref_audio / ref_text and an allowed path', async () => {
    const b64 = voice.toString('base64');
    expectAudio(await speech({ references: [{ text: 'A voice.', audio: b64 }] }), 'base64');
    expectAudio(await speech({ references: [{ audio: `data:audio/wav;base64,${b64}` }] }), 'data URL');
    expectAudio(await speech({ ref_audio: b64, ref_text: 'A voice.' }), 'legacy');
    expectAudio(await speech({ references: [{ text: 'A voice.',
                                              audio: path.join(mediaDir, 'voice.wav') }] }), 'path');
});

// The acceptance: the official openai client (audio.speech.create) and curl, each with and
// without a reference, whole and streamed (SSE), all give the same seeded audio.
test('the openai client and curl: with and without a reference, whole and streamed', async () => {
    const client = openaiClient(server);
    const reference = { references: [{ text: 'A voice.', audio: voice.toString('base64') }] };
    const common = { model: modelId, input: 'Hello there.', max_tokens: 4, seed: 3 };
    const sseAudio = (text, what) => {
        const events = sseData(text).map((data) => JSON.parse(data));
        assert.equal(events.at(-1)?.type, 'speech.audio.done', `${what}: ${text.slice(0, 300)}`);
        const deltas = events.filter((event) => event.type === 'speech.audio.delta');
        assert.ok(deltas.length >= 1, `${what}: no audio delta`);
        return Buffer.concat(deltas.map((event) => decodeBase64(event.audio, `${what} delta`)));
    };
    for (const [name, extra] of [['no reference', {}], ['a reference', reference]]) {
        const whole = await client.audio.speech.create({ ...common, ...extra, response_format: 'pcm' });
        assert.equal(whole.status, 200, name);
        const pcm = Buffer.from(await whole.arrayBuffer());
        assert.ok(pcm.length > 0 && pcm.length % 2 === 0, `${name}: ${pcm.length} bytes`);

        const streamed = await client.audio.speech.create({
            ...common, ...extra, response_format: 'pcm', stream_format: 'sse',
        });
        assert.equal(streamed.status, 200, name);
        assert.ok(sseAudio(await streamed.text(), `openai sse, ${name}`).equals(pcm),
                  `${name}: the openai client's SSE audio equals the whole answer`);

        const body = JSON.stringify({ ...common, ...extra, response_format: 'pcm' });
        const url = `${server.origin}/v1/audio/speech`;
        const headers = { 'Content-Type': 'application/json' };
        const file = await curl({ method: 'POST', url, headers, body });
        assert.equal(file.status, 200, `curl, ${name}: ${file.body.toString('utf8', 0, 300)}`);
        assert.ok(file.body.equals(pcm), `curl, ${name}: the same audio`);
        const sse = await curl({
            method: 'POST', url, headers, extraArgs: ['-N'],
            body: JSON.stringify({ ...common, ...extra, response_format: 'pcm', stream: true }),
        });
        assert.equal(sse.status, 200, `curl sse, ${name}`);
        assert.ok(sseAudio(sse.body.toString('utf8'), `curl sse, ${name}`).equals(pcm),
                  `curl sse, ${name}: the same audio`);
    }
});

test('reference codes', async () => {
    expectAudio(await speech({ references: [{ text: 'A reference.', vq_codes: kCodes }] }), 'codes');
});

test('malformed references: 400 naming the field, and the server goes on', async () => {
    const cases = [
        [{ references: 'x' }, 'references'],
        [{ references: [{ text: 'only text' }] }, 'references[0]'],
        [{ references: [{ audio: 'not base64!' }] }, 'references[0].audio'],
        [{ references: [{ audio: '/etc/passwd' }] }, 'references[0].audio'],
        [{ references: [{ vq_codes: [[1, 2], [3]] }] }, 'references[0].vq_codes'],
        [{ ref_text: 'no audio' }, 'ref_audio'],
    ];
    for (const [extra, param] of cases) {
        const { status, bytes } = await speech(extra);
        assert.equal(status, 400, `${JSON.stringify(extra)}: ${bytes.toString('utf8', 0, 300)}`);
        assertOpenAIError(JSON.parse(bytes.toString('utf8')), { param });
    }
    expectAudio(await speech({}), 'after the errors');
});

// ---- saved voices -------------------------------------------------------------------------

test('GET /v1/audio/voices lists the saved voices', async () => {
    const body = await (await fetch(`${server.origin}/v1/audio/voices`)).json();
    assert.deepEqual(body.voices, [{ id: 'alice', name: 'alice', kind: 'saved' },
                                   { id: 'bob', name: 'bob', kind: 'saved' }]);
});

test('a saved voice is its reference: the same audio as sending it', async () => {
    const saved = expectAudio(await speech({ voice: 'alice' }), 'voice alice');
    const sent = expectAudio(await speech({ references: [{ text: 'A voice.',
                                                           audio: voice.toString('base64') }] }),
                             'alice sent');
    assert.ok(saved.data.equals(sent.data), 'voice alice == its reference sent in the request');
    const upper = expectAudio(await speech({ voice: 'ALICE' }), 'voice ALICE');
    assert.ok(upper.data.equals(saved.data), 'names match case-insensitively');
    const codes = expectAudio(await speech({ voice: 'bob' }), 'voice bob');
    const codesSent = expectAudio(await speech({ references: [{ text: 'A reference.',
                                                                vq_codes: kCodes }] }), 'bob sent');
    assert.ok(codes.data.equals(codesSent.data), 'voice bob == its codes sent in the request');
});

test('unknown, hostile and conflicting voices: 400 naming voice', async () => {
    for (const name of ['carol', 'alloy', '../../etc/passwd', 'alice/../bob', 'a'.repeat(65),
                        'a'.repeat(5000), 'alice\u0000', '']) {
        const { status, bytes } = await speech({ voice: name });
        if (name === '') {
            expectAudio({ status, bytes }, 'empty voice: none');
            continue;
        }
        assert.equal(status, 400, `${JSON.stringify(name.slice(0, 40))}: ${bytes.toString('utf8', 0, 300)}`);
        assertOpenAIError(JSON.parse(bytes.toString('utf8')), { param: 'voice' });
    }
    const both = await speech({ voice: 'alice', references: [{ text: 'x', vq_codes: kCodes }] });
    assert.equal(both.status, 400);
    assertOpenAIError(JSON.parse(both.bytes.toString('utf8')), { param: 'voice' });
});

// ---- speed ----------------------------------------------------------------------------------

test('speed time-stretches: round(samples / speed), speed 1 untouched', async () => {
    const plain = expectAudio(await speech({}), 'speed absent');
    const frames = plain.data.length / 2;
    const one = expectAudio(await speech({ speed: 1.0 }), 'speed 1');
    assert.ok(one.data.equals(plain.data), 'speed 1 is bit-identical');
    for (const speed of [0.5, 2.0, 4.0]) {
        const stretched = expectAudio(await speech({ speed }), `speed ${speed}`);
        assert.equal(stretched.data.length / 2, Math.round(frames / speed), `speed ${speed}`);
    }
    // Streamed: chunk by chunk through the stretcher, the same length.
    const events = await speechSse({ response_format: 'pcm', speed: 2.0 });
    const pcm = Buffer.concat(events.filter((e) => e.type === 'speech.audio.delta')
        .map((e) => decodeBase64(e.audio)));
    assert.equal(pcm.length / 2, Math.round(frames / 2), 'streamed at speed 2');
    for (const speed of [0.1, 4.5, 'fast']) {
        const { status, bytes } = await speech({ speed });
        assert.equal(status, 400, `speed ${speed}`);
        assertOpenAIError(JSON.parse(bytes.toString('utf8')), { param: 'speed' });
    }
});

// ---- formats and stream modes ----------------------------------------------------------------

let ffprobe = true;
try {
    execFileSync('ffprobe', ['-version'], { stdio: 'ignore' });
} catch {
    ffprobe = false;
}

// ffprobe's view of encoded audio: {codec, sampleRate, channels, duration}.
async function probe(bytes, format) {
    const file = path.join(dir, `probe.${format}`);
    await writeFile(file, bytes);
    const input = format === 'pcm' ? ['-f', 's16le', '-ar', '44100', '-ac', '1', file] : [file];
    const result = await runProcess('ffprobe', ['-v', 'error', '-show_entries',
        'stream=codec_name,sample_rate,channels:format=duration', '-of', 'json', ...input]);
    assert.equal(result.code, 0, `ffprobe ${format}: ${result.stderr}`);
    const json = JSON.parse(result.stdout);
    const stream = json.streams[0];
    return { codec: stream.codec_name, sampleRate: Number(stream.sample_rate),
             channels: stream.channels, duration: Number(json.format.duration) };
}

const kFormats = {
    wav: { type: 'audio/wav', codec: 'pcm_s16le', rate: 44_100 },
    pcm: { type: 'audio/pcm', codec: 'pcm_s16le', rate: 44_100 },
    flac: { type: 'audio/flac', codec: 'flac', rate: 44_100 },
    mp3: { type: 'audio/mpeg', codec: 'mp3', rate: 44_100 },
    opus: { type: 'audio/ogg', codec: 'opus', rate: 48_000 },
    aac: { type: 'audio/aac', codec: 'aac', rate: 44_100 },
};

async function speechSse(extra) {
    const { status, bytes, headers } = await speech({ stream: true, ...extra });
    assert.equal(status, 200, bytes.toString('utf8', 0, 300));
    assert.equal(headers.get('content-type').split(';')[0], 'text/event-stream');
    return sseData(bytes.toString('utf8')).map((data) => JSON.parse(data));
}

test('every response_format decodes: file (usage headers), SSE, raw stream', { skip: !ffprobe && 'no ffprobe' }, async () => {
    const plain = expectAudio(await speech({}), 'reference length');
    const seconds = plain.data.length / 2 / 44_100;
    for (const [format, want] of Object.entries(kFormats)) {
        const file = await speech({ response_format: format });
        assert.equal(file.status, 200, `${format}: ${file.bytes.toString('utf8', 0, 300)}`);
        assert.equal(file.headers.get('content-type'), want.type, format);
        const completion = Number(file.headers.get('x-completion-tokens'));
        const prompt = Number(file.headers.get('x-prompt-tokens'));
        assert.ok(completion >= 1 && completion <= 4, `${format}: X-Completion-Tokens ${completion}`);
        assert.ok(prompt > 0, `${format}: X-Prompt-Tokens ${prompt}`);
        assert.equal(Number(file.headers.get('x-total-tokens')), prompt + completion);
        const probed = await probe(file.bytes, format);
        assert.equal(probed.codec, want.codec, format);
        assert.equal(probed.sampleRate, want.rate, format);
        assert.equal(probed.channels, 1, format);
        assert.ok(Math.abs(probed.duration - seconds) < 0.1,
                  `${format}: ${probed.duration} s, want ${seconds} s`);

        // SSE: the deltas joined are the format's stream; the last event carries the usage.
        const events = await speechSse({ response_format: format });
        const deltas = events.filter((e) => e.type === 'speech.audio.delta');
        assert.ok(deltas.length >= 1, `${format}: no delta`);
        const done = events.at(-1);
        assert.equal(done.type, 'speech.audio.done', format);
        assert.equal(done.usage.output_tokens, completion, `${format}: usage`);
        assert.equal(done.usage.input_tokens, prompt, `${format}: usage`);
        const joined = Buffer.concat(deltas.map((e) => decodeBase64(e.audio)));
        if (format === 'pcm') {
            for (const e of deltas) assert.equal(decodeBase64(e.audio).length % 2, 0, 'whole samples');
        }
        const streamed = await probe(joined, format);
        assert.equal(streamed.codec, want.codec, `${format} over SSE`);
        assert.equal(streamed.sampleRate, want.rate, `${format} over SSE`);

        // Raw: the encoded bytes themselves, chunked.
        const raw = await speech({ response_format: format, stream_format: 'audio' });
        assert.equal(raw.status, 200, format);
        assert.equal(raw.headers.get('content-type'), want.type, `${format} raw`);
        assert.equal(raw.headers.get('content-length'), null, `${format} raw is chunked`);
        const rawProbed = await probe(raw.bytes, format);
        assert.equal(rawProbed.codec, want.codec, `${format} raw`);
    }
    const m4a = await speech({ response_format: 'm4a' });
    assert.equal(m4a.status, 400, 'm4a is not produced');
    assertOpenAIError(JSON.parse(m4a.bytes.toString('utf8')), { param: 'response_format' });
});

test('bad input: 400 naming the field', async () => {
    const cases = [
        [{ input: '' }, 'input'],
        [{ references: [{ audio: Buffer.from('not audio').toString('base64') }] }, 'references[0].audio'],
        [{ ref_audio: Buffer.from('not audio').toString('base64') }, 'ref_audio'],
        [{ references: [{ text: 'x', vq_codes: kCodes }, { audio: Buffer.from('RIFF junk').toString('base64') }] },
         'references[1].audio'],
        [{ references: [{ text: 'long', audio: makeWav({ sampleRate: 8_000, seconds: 61 }).toString('base64') }] },
         'references[0].audio'],
        [{ voice: 'nobody' }, 'voice'],
    ];
    for (const [extra, param] of cases) {
        const { status, bytes } = await speech(extra);
        assert.equal(status, 400, `${param}: ${bytes.toString('utf8', 0, 300)}`);
        assertOpenAIError(JSON.parse(bytes.toString('utf8')), { param });
    }
    expectAudio(await speech({}), 'after the errors');
});

// SGLang-Omni's benchmarks/eval/benchmark_tts_speed.py (non-streaming) sends exactly these fields
// (voice cloning: ref_audio is a local path, the meta.lst directory joined with its entry; plain
// TTS with --no-ref-audio leaves ref_audio / ref_text out), and reads: the status, the WAV's
// duration as (bytes - 44) / (rate * channels * bits / 8) from the header at offsets 22, 24, 34,
// and X-Prompt-Tokens, X-Completion-Tokens and X-Engine-Time (tok/s = completion / engine time).
// A relative --testset makes ref_audio a relative path: resolved inside --allowed-media-dir. The
// engine time is the AR stage's share of the request (SGLang-Omni's engine_time_s), so less than
// the whole request as the client times it.
test('the SGLang-Omni benchmark client\'s request and response shapes', async () => {
    const refAudio = path.join(mediaDir, 'voice.wav');
    for (const extra of [{ ref_audio: refAudio, ref_text: 'A voice.' },
                         { ref_audio: 'voice.wav', ref_text: 'A voice.' }, {}]) {
        const started = performance.now();
        const response = await fetch(`${server.origin}/v1/audio/speech`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: modelId, input: 'Hello there.', response_format: 'wav',
                                   ...extra, max_new_tokens: 4 }),
            signal: AbortSignal.timeout(kRequestTimeoutMs),
        });
        const bytes = Buffer.from(await response.arrayBuffer());
        const elapsed = (performance.now() - started) / 1000;
        const what = extra.ref_audio ? `voice cloning (${extra.ref_audio})` : 'plain';
        assert.equal(response.status, 200, `${what}: ${bytes.toString('utf8', 0, 300)}`);
        const rate = bytes.readUInt32LE(24);
        const channels = bytes.readUInt16LE(22);
        const bits = bytes.readUInt16LE(34);
        assert.deepEqual([rate, channels, bits], [44_100, 1, 16], what);
        const seconds = (bytes.length - 44) / (rate * channels * bits / 8);
        assert.equal(seconds, parseWav(bytes).data.length / 2 / 44_100, `${what}: 44-byte header`);
        assert.ok(seconds > 0, `${what}: no audio`);
        const prompt = Number(response.headers.get('x-prompt-tokens'));
        const completion = Number(response.headers.get('x-completion-tokens'));
        const engineTime = Number(response.headers.get('x-engine-time'));
        assert.ok(Number.isInteger(prompt) && prompt > 0, `${what}: X-Prompt-Tokens ${prompt}`);
        assert.ok(Number.isInteger(completion) && completion >= 1 && completion <= 4,
                  `${what}: X-Completion-Tokens ${completion} (max_new_tokens 4)`);
        assert.ok(Number.isFinite(engineTime) && engineTime > 0, `${what}: X-Engine-Time ${engineTime}`);
        assert.ok(engineTime < elapsed, `${what}: X-Engine-Time ${engineTime} s, request ${elapsed} s`);
    }
    // max_new_tokens is checked like max_tokens, under its own name.
    const { status, bytes } = await speech({ max_tokens: undefined, max_new_tokens: 0 });
    assert.equal(status, 400, bytes.toString('utf8', 0, 300));
    assertOpenAIError(JSON.parse(bytes.toString('utf8')), { param: 'max_new_tokens' });
});
