// The playground's live voice conversation over GET /v1/realtime (OpenAI Realtime GA events):
// chromium's fake microphone plays a spoken WAV (espeak-ng + sox) in a loop, the page streams it
// up as input_audio_buffer.append, the server's VAD ends the turn, the reply's audio plays.
//
// The server's VAD is Silero's model from the cache the setup fills (scripts/fetch_vad_model.sh);
// without it the voice turn is skipped with that reason. A refused session (no API key) is
// tested in api_key.test.mjs.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startServer } from '../e2e/server.mjs';
import { hooks, launchBrowser, openPlayground, setGeneration, waitForHooks } from './browser.mjs';
import { makeSpeechWav } from './speech_wav.mjs';

let dir;
let server;
let realtimeStatus;
// The model the setup cached (the server's private cache below holds only the checkpoint).
const vadModel = path.join(process.env.OMNIRT_CACHE_DIR || path.join(os.homedir(), '.cache', 'omnirt'),
                           'silero_vad', 'silero_vad_v5.onnx');

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-browser-rt-'));
    server = await startServer({
        pipeline: 'default', args: ['--vad-model', existsSync(vadModel) ? vadModel : 'none'],
        env: { OMNIRT_CACHE_DIR: dir }, startTimeoutMs: 120_000,
    });
    // A plain GET (no upgrade): 404 while the route does not exist, 400 / 426 once it does.
    realtimeStatus = (await fetch(`${server.origin}/v1/realtime`)).status;
});

after(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

test('a live voice turn: mic up, VAD turn, the reply plays with its TTFA', async (t) => {
    assert.equal(realtimeStatus, 426, 'GET /v1/realtime without an upgrade');
    if (!existsSync(vadModel)) {
        t.skip(`no Silero VAD model at ${vadModel} (scripts/fetch_vad_model.sh fetches it)`);
        return;
    }
    const browser = await launchBrowser({ micFile: makeSpeechWav(dir) });
    try {
        const page = await openPlayground(browser, server);
        await page.select('#voice', 'ethan');
        await setGeneration(page, { maxTokens: 16, temperature: 0 });
        await page.click('#mic');
        await waitForHooks(page, () => window.omnirtPlayground.state.realtime === 'listening' ||
                                       window.omnirtPlayground.errors.length > 0,
                           'the realtime session opening');
        assert.deepEqual((await hooks(page)).errors, [], 'the session opened');
        await waitForHooks(page, () => window.omnirtPlayground.stats.turns.some(
                                       (turn) => turn.kind === 'voice' && turn.ttfaMs !== null),
                           'a voice turn answered with audio');
        await waitForHooks(page, () => window.omnirtPlayground.stats.audioFramesPlayed > 0,
                           'reply audio playing');
        const { stats, events, errors } = await hooks(page);

        const sent = events.filter((e) => e.direction === 'out');
        assert.equal(sent[0].type, 'session.update');
        assert.deepEqual(sent[0].event.session, {
            type: 'realtime',
            output_modalities: ['audio'],
            max_output_tokens: 16,
            stage_sampling: { talker: { max_tokens: 50 } },  // the Max frames field's default
            audio: {
                input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: { type: 'server_vad' } },
                output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'ethan' },
            },
        });
        assert.ok(stats.audioChunksSent > 0, 'microphone audio was sent');
        const received = events.filter((e) => e.direction === 'in').map((e) => e.type);
        for (const type of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped',
                            'response.created', 'response.output_audio.delta']) {
            assert.ok(received.includes(type), `received ${type} (got ${[...new Set(received)]})`);
        }
        assert.ok(!received.includes('error'), JSON.stringify(events.filter((e) => e.type === 'error')));
        assert.deepEqual(errors, []);
        const turn = stats.turns.find((candidate) => candidate.kind === 'voice' && candidate.ttfaMs !== null);
        assert.ok(turn.ttfaMs >= 0 && turn.audioBytes > 0, JSON.stringify(turn));
        assert.match(await page.$eval('.message.assistant [data-figure="ttfa"]', (e) => e.textContent),
                     /^TTFA \d+(\.\d)? (ms|s)$/);
        // The looping input speaks again: a barge-in over audio still playing truncates the item
        // at what was heard.
        for (const truncate of sent.filter((e) => e.type === 'conversation.item.truncate')) {
            assert.equal(truncate.event.content_index, 0);
            assert.ok(Number.isInteger(truncate.event.audio_end_ms) && truncate.event.audio_end_ms >= 0);
            assert.ok(events.some((e) => e.type === 'response.output_audio.delta' &&
                                         e.event.item_id === truncate.event.item_id));
        }

        await page.click('#mic');
        await waitForHooks(page, () => window.omnirtPlayground.state.realtime === 'off', 'the session closing');
        assert.deepEqual(page.problems, []);
    } finally {
        await browser.close();
    }
});
