// Chat completions with audio output (modalities ["text", "audio"]): message.audio when not
// streaming, delta.audio chunks when streaming. The demo talker speaks 360 samples per code point
// of the transcript at 24 kHz mono (docs/demo_pipeline.md), so lengths are exact.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { startServer } from './server.mjs';
import {
    codePoints, decodeBase64, kSampleRate, kSamplesPerCodePoint, openaiClient, parseWav,
    pcm16Samples,
} from './helpers.mjs';

const kModel = 'demo';
const kReply = 'You said: hello there.';
const kReplySamples = codePoints(kReply) * kSamplesPerCodePoint;
const hello = [{ role: 'user', content: 'hello there' }];

let server;
let client;

before(async () => {
    server = await startServer();
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

async function chatAudio(audio, extra = {}) {
    return client.chat.completions.create({
        model: kModel, messages: hello, modalities: ['text', 'audio'], audio, ...extra,
    });
}

// A streaming chat with audio: the text (content and transcript deltas kept apart), the decoded
// audio deltas and the chunks.
async function streamChatAudio(audio) {
    const stream = await chatAudio(audio, { stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    let content = '';
    let transcript = '';
    const audioParts = [];
    for (const chunk of chunks) {
        const delta = chunk.choices[0]?.delta ?? {};
        content += delta.content ?? '';
        if (delta.audio) {
            transcript += delta.audio.transcript ?? '';
            if (delta.audio.data !== undefined && delta.audio.data !== null) {
                audioParts.push(decodeBase64(delta.audio.data, 'delta.audio.data'));
            }
        }
    }
    return { chunks, content, transcript, audioParts };
}

function assertReplyText({ content, transcript }) {
    assert.ok(content === kReply || transcript === kReply,
              `the reply arrives as delta.content or delta.audio.transcript: ` +
              `content ${JSON.stringify(content)}, transcript ${JSON.stringify(transcript)}`);
    for (const text of [content, transcript]) {
        assert.ok(text === '' || text === kReply, `a partial or doubled reply: ${JSON.stringify(text)}`);
    }
}

describe('chat with audio, non-streaming', () => {
    test('wav: message.audio is a 24 kHz mono PCM16 RIFF/WAVE of the transcript', async () => {
        const completion = await chatAudio({ voice: 'alloy', format: 'wav' });
        const { message } = completion.choices[0];
        assert.equal(completion.choices[0].finish_reason, 'stop');
        assert.ok(message.content === null || message.content === kReply,
                  `content is null or the reply: ${JSON.stringify(message.content)}`);
        assert.ok(message.audio, 'message.audio is present');
        assert.match(message.audio.id, /^audio_/);
        assert.equal(message.audio.transcript, kReply);
        const wav = parseWav(decodeBase64(message.audio.data, 'message.audio.data'));
        assert.ok(wav.audioFormat === 1 || wav.audioFormat === 0xfffe, `PCM format, got ${wav.audioFormat}`);
        assert.equal(wav.channels, 1);
        assert.equal(wav.sampleRate, kSampleRate);
        assert.equal(wav.bitsPerSample, 16);
        const samples = pcm16Samples(wav.data);
        assert.equal(samples.length, kReplySamples, 'samples: 360 per code point of the transcript');
        assert.ok(samples.some((sample) => sample !== 0), 'the audio is not silent');
        // "You said: ..." — the 4th code point is a space: silence.
        const space = samples.subarray(3 * kSamplesPerCodePoint, 4 * kSamplesPerCodePoint);
        assert.ok(space.every((sample) => sample === 0), 'whitespace is silence');
        assert.equal(completion.usage.completion_tokens, 4);
    });

    test('pcm16: raw samples; another voice sounds different', async () => {
        const alloy = await chatAudio({ voice: 'alloy', format: 'pcm16' });
        const alloyBytes = decodeBase64(alloy.choices[0].message.audio.data);
        assert.equal(alloyBytes.length, 2 * kReplySamples);
        const echo = await chatAudio({ voice: 'echo', format: 'pcm16' });
        const echoBytes = decodeBase64(echo.choices[0].message.audio.data);
        assert.equal(echoBytes.length, 2 * kReplySamples);
        assert.ok(!alloyBytes.equals(echoBytes), 'voices have different tones');
        const again = await chatAudio({ voice: 'alloy', format: 'pcm16' });
        assert.ok(decodeBase64(again.choices[0].message.audio.data).equals(alloyBytes),
                  'the same request gives the same audio');
    });

    test('flac: a FLAC stream of 24 kHz mono', async () => {
        const completion = await chatAudio({ voice: 'alloy', format: 'flac' });
        const bytes = decodeBase64(completion.choices[0].message.audio.data);
        assert.equal(bytes.toString('latin1', 0, 4), 'fLaC');
        // STREAMINFO follows the 4-byte block header: sample rate (20 bits), channels - 1 (3 bits).
        const sampleRate = (bytes[18] << 12) | (bytes[19] << 4) | (bytes[20] >> 4);
        assert.equal(sampleRate, kSampleRate);
        assert.equal(((bytes[20] >> 1) & 7) + 1, 1);
    });
});

describe('chat with audio, streaming', () => {
    test('wav: audio deltas arrive, the text is the reply', async () => {
        const result = await streamChatAudio({ voice: 'alloy', format: 'wav' });
        assert.ok(result.audioParts.length > 0, 'at least one delta.audio.data');
        const total = result.audioParts.reduce((sum, part) => sum + part.length, 0);
        assert.ok(total > 0, 'the audio deltas are not empty');
        assertReplyText(result);
        const finishes = result.chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
        assert.equal(finishes.length, 1);
        assert.equal(finishes[0].choices[0].finish_reason, 'stop');
        const ids = new Set(result.chunks.map((chunk) => chunk.id));
        assert.equal(ids.size, 1, 'every chunk has the completion id');
    });

    test('pcm16: the deltas concatenate to the non-streaming audio', async () => {
        const result = await streamChatAudio({ voice: 'alloy', format: 'pcm16' });
        assertReplyText(result);
        const streamed = Buffer.concat(result.audioParts);
        assert.equal(streamed.length, 2 * kReplySamples);
        const whole = await chatAudio({ voice: 'alloy', format: 'pcm16' });
        assert.ok(streamed.equals(decodeBase64(whole.choices[0].message.audio.data)),
                  'streamed PCM equals the non-streaming PCM');
    });
});
