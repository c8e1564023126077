// Fish Audio S2-Pro behind POST /v1/audio/speech: `omnirt serve --model-path DIR` on a generated
// tiny S2-Pro checkpoint (the family's TTS pipeline: preprocess -> AR -> streaming vocoder),
// without a reference, with reference audio (base64, a data: URL, the legacy ref_audio /
// ref_text, a path in the allowed media directory) and with reference codes; malformed
// references are 400s naming the field.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { omnirtBinary, startServer } from './server.mjs';
import { assertOpenAIError, kRequestTimeoutMs, makeWav, parseWav, runProcess } from './helpers.mjs';

let dir;
let mediaDir;
let server;
let modelId;
const voice = makeWav({ sampleRate: 16_000, seconds: 0.2, hz: 220 });

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-s2-'));
    mediaDir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-e2e-s2-media-'));
    await writeFile(path.join(mediaDir, 'voice.wav'), voice);
    const made = await runProcess(omnirtBinary(), ['make-checkpoint', '--arch', 's2_pro', '--preset',
                                                   'tiny', '--quiet', '--out', dir]);
    assert.equal(made.code, 0, made.stderr);
    server = await startServer({ pipeline: 'default',
                                 args: ['--model-path', dir, '--allowed-media-dir', mediaDir] });
    const models = await (await fetch(`${server.origin}/v1/models`)).json();
    modelId = models.data[0].id;
});

after(async () => {
    await server?.stop();
    for (const d of [dir, mediaDir]) if (d) await rm(d, { recursive: true, force: true });
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

test('reference codes', async () => {
    const codes = Array.from({ length: 10 }, (_, k) => [k, k + 1, k + 2]);
    expectAudio(await speech({ references: [{ text: 'A reference.', vq_codes: codes }] }), 'codes');
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
    // Bytes that are base64 but no audio: the pipeline's preprocessing refuses them.
    const garbage = await speech({ references: [{ audio: Buffer.from('not audio').toString('base64') }] });
    assert.ok(garbage.status >= 400 && garbage.status < 500, `garbage audio: ${garbage.status}`);
    expectAudio(await speech({}), 'after the errors');
});
