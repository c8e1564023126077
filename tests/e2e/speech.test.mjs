// POST /v1/audio/speech in every response_format (openai's audio.speech.create), its SSE
// stream (curl), and its validation. The demo talker speaks the input exactly: 360 samples per
// code point at 24 kHz mono, divided by `speed` (docs/demo_pipeline.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { startServer } from './server.mjs';
import {
    assertOpenAIError, codePoints, curl, decodeBase64, expectApiError, kSampleRate,
    kSamplesPerCodePoint, mediaType, openaiClient, parseWav, pcm16Samples, sseData,
} from './helpers.mjs';

const kModel = 'demo';
const kInput = 'hello world';
const kInputSamples = codePoints(kInput) * kSamplesPerCodePoint;

let server;
let client;

before(async () => {
    server = await startServer();
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

// {contentType, bytes} of a speech request made with the openai client.
async function speech(params) {
    const response = await client.audio.speech.create({
        model: kModel, voice: 'alloy', input: kInput, ...params,
    });
    assert.equal(response.status, 200);
    return {
        contentType: mediaType(response.headers.get('content-type')),
        bytes: Buffer.from(await response.arrayBuffer()),
    };
}

async function speechSse(body) {
    const response = await curl({
        method: 'POST',
        url: `${server.baseURL}/audio/speech`,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: kModel, voice: 'alloy', input: kInput, ...body }),
        extraArgs: ['-N'],
    });
    assert.equal(response.status, 200, response.body.toString());
    assert.equal(mediaType(response.headers['content-type']), 'text/event-stream');
    const events = sseData(response.body.toString('utf8')).filter((data) => data !== '[DONE]')
        .map((data) => JSON.parse(data));
    return events;
}

describe('speech, whole files', () => {
    test('wav: RIFF/WAVE, 24 kHz mono PCM16, 360 samples per code point', async () => {
        const { contentType, bytes } = await speech({ response_format: 'wav' });
        assert.equal(contentType, 'audio/wav');
        const wav = parseWav(bytes);
        assert.ok(wav.audioFormat === 1 || wav.audioFormat === 0xfffe, `PCM format, got ${wav.audioFormat}`);
        assert.equal(wav.sampleRate, kSampleRate);
        assert.equal(wav.channels, 1);
        assert.equal(wav.bitsPerSample, 16);
        const samples = pcm16Samples(wav.data);
        assert.equal(samples.length, kInputSamples);
        assert.ok(samples.subarray(0, kSamplesPerCodePoint).some((sample) => sample !== 0), "'h' is a tone");
        assert.ok(samples.subarray(5 * kSamplesPerCodePoint, 6 * kSamplesPerCodePoint).every((s) => s === 0),
                  'the space is silence');
    });

    test('pcm: raw PCM16, an even number of bytes, the same samples as the wav', async () => {
        const { contentType, bytes } = await speech({ response_format: 'pcm' });
        assert.equal(contentType, 'audio/pcm');
        assert.ok(bytes.length > 0);
        assert.equal(bytes.length % 2, 0);
        assert.equal(bytes.length, 2 * kInputSamples);
        const wav = parseWav((await speech({ response_format: 'wav' })).bytes);
        assert.ok(bytes.equals(wav.data), 'pcm equals the wav data chunk');
    });

    test('flac: fLaC with a 24 kHz mono STREAMINFO', async () => {
        const { contentType, bytes } = await speech({ response_format: 'flac' });
        assert.equal(contentType, 'audio/flac');
        assert.equal(bytes.toString('latin1', 0, 4), 'fLaC');
        assert.equal(bytes[4] & 0x7f, 0, 'the first metadata block is STREAMINFO');
        const sampleRate = (bytes[18] << 12) | (bytes[19] << 4) | (bytes[20] >> 4);
        assert.equal(sampleRate, kSampleRate);
        assert.equal(((bytes[20] >> 1) & 7) + 1, 1, 'mono');
        const totalSamples = (bytes[21] & 0x0f) * 2 ** 32 + bytes.readUInt32BE(22);
        // 0 is FLAC's "unknown"; anything else must be the real count.
        assert.ok(totalSamples === 0 || totalSamples === kInputSamples, `total samples ${totalSamples}`);
    });

    test('opus: an Ogg stream with an OpusHead of one channel', async () => {
        const { contentType, bytes } = await speech({ response_format: 'opus' });
        assert.ok(['audio/ogg', 'audio/opus'].includes(contentType), contentType);
        assert.equal(bytes.toString('latin1', 0, 4), 'OggS');
        const head = bytes.indexOf('OpusHead', 0, 'latin1');
        assert.ok(head > 0, 'contains OpusHead');
        assert.equal(bytes[head + 9], 1, 'OpusHead channel count');
        assert.ok(bytes.length > head + 19);
    });

    test('mp3: ID3 or an MPEG frame sync (or a 400 on response_format where unsupported)', async () => {
        let result;
        try {
            result = await speech({ response_format: 'mp3' });
        } catch (error) {
            // A libsndfile without an mp3 encoder: the server must say so on response_format.
            if (error?.status !== 400) throw error;
            assertOpenAIError({ error: error.error });
            assert.ok(error.param === 'response_format' || /response_format/.test(error.message),
                      `the 400 names response_format: ${error.message}`);
            return;
        }
        assert.equal(result.contentType, 'audio/mpeg');
        const bytes = result.bytes;
        assert.ok(bytes.length > 4);
        const id3 = bytes.toString('latin1', 0, 3) === 'ID3';
        const sync = bytes[0] === 0xff && (bytes[1] & 0xe0) === 0xe0;
        assert.ok(id3 || sync, `mp3 starts with ID3 or a frame sync: ${bytes.subarray(0, 4).toString('hex')}`);
    });

    test('speed divides the duration; the voice changes the tone', async () => {
        const fast = parseWav((await speech({ response_format: 'wav', speed: 2.0 })).bytes);
        assert.equal(fast.data.length / 2, codePoints(kInput) * (kSamplesPerCodePoint / 2));
        const alloy = (await speech({ response_format: 'pcm', voice: 'alloy' })).bytes;
        const nova = (await speech({ response_format: 'pcm', voice: 'nova' })).bytes;
        assert.equal(nova.length, alloy.length);
        assert.ok(!nova.equals(alloy), 'another voice, another tone');
    });
});

describe('speech, streaming (SSE)', () => {
    for (const [name, body] of [['stream_format: "sse"', { stream_format: 'sse' }],
                                ['stream: true', { stream: true }]]) {
        test(`${name}: speech.audio.delta events, then speech.audio.done`, async () => {
            const events = await speechSse({ response_format: 'pcm', ...body });
            assert.ok(events.length >= 2, `events: ${events.length}`);
            const deltas = events.slice(0, -1);
            for (const event of deltas) {
                assert.equal(event.type, 'speech.audio.delta');
            }
            const audio = deltas.map((event) => decodeBase64(event.audio, 'speech.audio.delta audio'));
            assert.ok(audio.every((part) => part.length > 0), 'no empty audio deltas');
            const done = events.at(-1);
            assert.equal(done.type, 'speech.audio.done');
            assert.equal(typeof done.usage, 'object');
            for (const key of ['input_tokens', 'output_tokens', 'total_tokens']) {
                assert.equal(typeof done.usage[key], 'number', `usage.${key}`);
            }
            const streamed = Buffer.concat(audio);
            assert.equal(streamed.length, 2 * kInputSamples, 'the deltas hold every sample');
            const whole = (await speech({ response_format: 'pcm' })).bytes;
            assert.ok(streamed.equals(whole), 'streamed PCM equals the whole-file PCM');
        });
    }
});

describe('speech, validation', () => {
    test('response_format "m4a" is a 400 on response_format', async () => {
        const error = await expectApiError(() => speech({ response_format: 'm4a' }), 400);
        assert.equal(error.param, 'response_format');
    });

    test('upper-case "WAV" is a 400 on response_format', async () => {
        const error = await expectApiError(() => speech({ response_format: 'WAV' }), 400);
        assert.equal(error.param, 'response_format');
    });

    test('empty or missing input is a 400 on input', async () => {
        const empty = await expectApiError(() => speech({ input: '' }), 400);
        assert.equal(empty.param, 'input');
        const response = await curl({
            method: 'POST',
            url: `${server.baseURL}/audio/speech`,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ model: kModel, voice: 'alloy' }),
        });
        assert.equal(response.status, 400);
        assertOpenAIError(response.body, { param: 'input' });
    });

    test('speed out of range is a 400 on speed', async () => {
        const error = await expectApiError(() => speech({ speed: 10 }), 400);
        assert.equal(error.param, 'speed');
    });
});
