// The playground's realtime voice client in isolation, against a scripted server
// (fake_realtime_server.mjs) instead of omnirt: what it sends (session.update, 40 ms PCM16 appends
// at 24 kHz in real time), what it does with the replies (plays them, TTFA from speech_stopped)
// and the barge-in (speech over a playing reply stops it, truncates the item at what was heard
// and drops the reply's deltas still on their way). realtime.test.mjs runs the same page against the real server once it has the endpoint.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startFakeRealtimeServer } from './fake_realtime_server.mjs';
import { hooks, launchBrowser, openPlayground, waitForHooks } from './browser.mjs';
import { makeSpeechWav } from './speech_wav.mjs';

let dir;
let fake;
let browser;

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-browser-fake-rt-'));
    // A reply streamed in real time and longer than the input's pause, so the looping input
    // speaks over it while it still streams.
    fake = await startFakeRealtimeServer({ replySeconds: 8, paceMs: 200, voices: ['ethan', 'chelsie'] });
    browser = await launchBrowser({ micFile: makeSpeechWav(dir) });
});

after(async () => {
    await browser?.close();
    await fake?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
});

test('voice: mic up in real time, the reply plays, speech over it barges in', async () => {
    const page = await openPlayground(browser, fake);
    await page.select('#voice', 'chelsie');
    await page.click('#mic');
    await waitForHooks(page, () => window.omnirtPlayground.state.realtime === 'listening' ||
                                   window.omnirtPlayground.errors.length > 0,
                       'the session listening');
    assert.deepEqual((await hooks(page)).errors, [], 'the session opened');

    await waitForHooks(page, () => window.omnirtPlayground.stats.turns[0]?.done === true,
                       'the first voice turn answered');
    await waitForHooks(page, () => window.omnirtPlayground.stats.audioFramesPlayed > 0, 'the reply playing');
    await waitForHooks(page, () => window.omnirtPlayground.events.some(
                           (e) => e.type === 'conversation.item.truncate'), 'a barge-in');
    const { stats, events, errors, state } = await hooks(page);
    assert.deepEqual(errors, []);

    const update = fake.received.find((e) => e.type === 'session.update');
    assert.deepEqual(update.session.audio, {
        input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: { type: 'server_vad' } },
        output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'chelsie' },
    });
    assert.deepEqual(update.session.output_modalities, ['audio']);
    assert.equal(update.session.type, 'realtime');

    // 40 ms of 24 kHz PCM16 per append, sent as fast as it is captured.
    const appends = fake.received.filter((e) => e.type === 'input_audio_buffer.append');
    assert.ok(appends.length > 50, `${appends.length} appends`);
    assert.ok(appends.every((a) => a.bytes === 1920), 'every append is 960 samples');
    assert.ok(fake.appendRate > 20_000 && fake.appendRate < 28_000,
              `appended ${Math.round(fake.appendRate)} samples per second`);

    const [turn] = stats.turns;
    assert.equal(turn.kind, 'voice');
    assert.ok(turn.ttfaMs >= 0 && turn.ttfaMs < 5000, JSON.stringify(turn));
    assert.equal(turn.text, 'a tone');
    assert.deepEqual(turn.usage, { prompt_tokens: 10, completion_tokens: 40 });
    // The reply was interrupted while it streamed: the deltas that were already on their way
    // when the user spoke again were dropped, not played or counted.
    const [reply] = fake.responses;
    assert.equal(reply.status, 'cancelled');
    assert.equal(reply.lateDeltas, 2);
    assert.ok(reply.bytesBeforeInterrupt < 8 * 24000 * 2);
    assert.equal(turn.audioBytes, reply.bytesBeforeInterrupt);
    assert.match(await page.$eval('.message.assistant [data-figure="ttfa"]', (e) => e.textContent),
                 /^TTFA \d+ ms$/);
    assert.equal(await page.$eval('.message.assistant .text', (e) => e.textContent), 'a tone');

    // The barge-in: the looping input spoke again while the 8 s reply played.
    const truncate = fake.received.find((e) => e.type === 'conversation.item.truncate');
    assert.equal(truncate.item_id, 'item_reply_1');
    assert.equal(truncate.content_index, 0);
    assert.ok(truncate.audio_end_ms > 500 && truncate.audio_end_ms < 8000, JSON.stringify(truncate));
    const sentAt = events.find((e) => e.type === 'conversation.item.truncate').at;
    const startedAt = events.filter((e) => e.type === 'input_audio_buffer.speech_started')[1].at;
    assert.ok(sentAt >= startedAt, 'the truncate follows the second speech_started');
    // What was played stops at the cut: the frames heard are what the truncate reports.
    const heardMs = (stats.audioFramesPlayed / 24000) * 1000;
    assert.ok(Math.abs(heardMs - truncate.audio_end_ms) < 50, `${heardMs} vs ${truncate.audio_end_ms}`);
    assert.ok(state.realtime !== 'off');

    await page.click('#mic');
    await waitForHooks(page, () => window.omnirtPlayground.state.realtime === 'off', 'the session closing');
    assert.deepEqual(page.problems, []);
});
