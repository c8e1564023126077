// The playground at / in headless chromium against the real `omnirt serve` without arguments (the
// Qwen3-Omni speech pipeline on the tiny checkpoint; random weights, so the words are arbitrary
// but every figure is real): the page loads clean, a chat streams with its history, an image
// reaches the model, spoken replies play through Web Audio.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';

import { repoRoot, startServer } from '../e2e/server.mjs';
import { makeBmp, makeWav } from '../e2e/media_files.mjs';
import {
    hooks, launchBrowser, openPlayground, sendMessage, setGeneration, waitForHooks,
} from './browser.mjs';

const kModel = 'qwen3-omni-speech';
// Talker frames of a spoken reply, and the samples code2wav makes of them: chunks of 10, then 2
// new frames, each 1920 samples per frame less 555 (as tests/e2e/qwen3_omni_speech.test.mjs).
const kFrames = 12;
const kSpeechSamples = 1920 * kFrames - 555 * 2;

let dir;
let server;
let browser;

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-browser-'));
    server = await startServer({
        pipeline: 'default', env: { OMNIRT_CACHE_DIR: dir }, startTimeoutMs: 120_000,
    });
    browser = await launchBrowser();
});

after(async () => {
    await browser?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

test('the page and its assets load with no console errors; model and voices come from the server', async () => {
    const page = await openPlayground(browser, server);
    const { state } = await hooks(page);
    assert.equal(state.model, kModel);
    assert.deepEqual(state.voices, ['aiden', 'chelsie', 'ethan']);
    const options = await page.$$eval('#voice option', (list) => list.map((o) => o.value));
    assert.deepEqual(options, ['', 'aiden', 'chelsie', 'ethan']);
    assert.equal(await page.$eval('#model', (e) => e.textContent), kModel);
    assert.equal(await page.$eval('#status', (e) => e.dataset.state), 'ready');

    const script = await fetch(`${server.origin}/playground/app.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type'), /^text\/javascript/);
    assert.equal(script.headers.get('cache-control'), 'no-cache');
    const voices = await fetch(`${server.origin}/v1/audio/voices`).then((r) => r.json());
    assert.deepEqual(voices.voices.map((v) => v.id), ['aiden', 'chelsie', 'ethan']);
    assert.deepEqual(page.problems, []);
    await page.close();
});

test('a text chat streams into the page, keeps its history and shows the TTFT', async () => {
    const page = await openPlayground(browser, server);
    // At temperature 1 about one token in a hundred has text (the tiny tokenizer spells 989 of the
    // 152k ids), so 1000 tokens say several words; seed 2 gives the same words every run.
    await setGeneration(page, { maxTokens: 1000, temperature: 1, seed: 2 });
    const first = await sendMessage(page, 'hello');
    let { stats, state } = await hooks(page);
    const turn = stats.turns[first];
    assert.equal(turn.error, null);
    assert.ok(turn.textDeltas >= 2, `several text deltas, got ${turn.textDeltas}`);
    assert.ok(turn.chunks > turn.textDeltas, 'role, finish and usage chunks besides the text');
    assert.ok(turn.text.length > 0);
    assert.equal(turn.usage.completion_tokens, 1000);
    assert.ok(turn.ttftMs > 0 && turn.ttftMs <= turn.totalMs, JSON.stringify(turn));
    const shown = await page.$$eval('.message.assistant .text', (list) => list.map((e) => e.textContent));
    assert.deepEqual(shown, [turn.text]);
    assert.match(await page.$eval('.message.assistant [data-figure="ttft"]', (e) => e.textContent),
                 /^TTFT \d+(\.\d)? (ms|s)$/);

    // The second turn sends the whole conversation: its prompt holds the first exchange.
    const second = await sendMessage(page, 'and then?');
    ({ stats, state } = await hooks(page));
    assert.equal(stats.turns[second].error, null);
    assert.deepEqual(state.conversation.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.equal(state.conversation[1].content, turn.text);
    assert.ok(stats.turns[second].usage.prompt_tokens > turn.usage.prompt_tokens + 2,
              `${stats.turns[second].usage.prompt_tokens} vs ${turn.usage.prompt_tokens}`);
    assert.deepEqual(page.problems, []);
    await page.close();
});

test('an attached image goes to the model as an image_url part and adds its tokens', async () => {
    const page = await openPlayground(browser, server);
    await setGeneration(page, { maxTokens: 4, temperature: 0 });
    const textOnly = await sendMessage(page, 'what is this?');
    await page.click('#clear');

    const file = path.join(dir, 'picture.bmp');
    await writeFile(file, makeBmp(64, 48, 5));
    const input = await page.$('#file');
    await input.uploadFile(file);
    await waitForHooks(page, () => document.querySelectorAll('#attachments li').length === 1,
                       'the attachment chip');
    const withImage = await sendMessage(page, 'what is this?');
    const { stats, state } = await hooks(page);
    assert.equal(stats.turns[withImage].error, null);
    const [user] = state.conversation;
    assert.deepEqual(user.content.map((part) => part.type), ['image_url', 'text']);
    assert.match(user.content[0].image_url.url, /^data:image\/bmp;base64,Qk/);
    const imageTokens = stats.turns[withImage].usage.prompt_tokens - stats.turns[textOnly].usage.prompt_tokens;
    assert.ok(imageTokens > 2, `the image adds tokens to the prompt (got ${imageTokens})`);
    assert.match(await page.$eval('.message.user img', (e) => e.src), /^blob:/);
    assert.equal(await page.$$eval('#attachments li', (l) => l.length), 0, 'sent attachments are cleared');
    assert.deepEqual(page.problems, []);
    await page.close();
});

test('an audio clip and a video go as input_audio and video_url parts, each adding tokens', async () => {
    const page = await openPlayground(browser, server);
    await setGeneration(page, { maxTokens: 4, temperature: 0 });
    const textOnly = await sendMessage(page, 'what happens?');
    const clip = path.join(dir, 'clip.wav');
    await writeFile(clip, makeWav({ sampleRate: 16_000, seconds: 1 }));
    const video = path.join(repoRoot, 'tests', 'media', 'goldens', 'video_h264_aac.mp4');
    const counts = [];
    for (const file of [clip, video]) {
        await page.click('#clear');
        await (await page.$('#file')).uploadFile(file);
        await waitForHooks(page, () => document.querySelectorAll('#attachments li').length === 1,
                           'the attachment chip');
        const index = await sendMessage(page, 'what happens?');
        const { stats, state } = await hooks(page);
        assert.equal(stats.turns[index].error, null, path.basename(file));
        counts.push(stats.turns[index].usage.prompt_tokens);
        const types = state.conversation[0].content.map((part) => part.type);
        assert.deepEqual(types, [file === clip ? 'input_audio' : 'video_url', 'text']);
    }
    const base = (await hooks(page)).stats.turns[textOnly].usage.prompt_tokens;
    assert.ok(counts.every((count) => count > base + 2), `${counts} vs text only ${base}`);
    assert.equal(await page.$$eval('.message.user audio, .message.user video', (l) => l.length), 1);
    assert.deepEqual(page.problems, []);
    await page.close();
});

test('speak replies streams pcm16 and plays every frame through Web Audio', async () => {
    const page = await openPlayground(browser, server);
    await page.click('label.switch');
    assert.equal(await page.$eval('#speak', (e) => e.checked), true);
    await page.select('#voice', 'chelsie');
    await setGeneration(page, { maxTokens: 6, temperature: 0, maxFrames: kFrames });
    const index = await sendMessage(page, 'hello there');
    let { stats } = await hooks(page);
    const turn = stats.turns[index];
    assert.equal(turn.error, null);
    assert.equal(turn.wantsAudio, true);
    assert.ok(turn.audioChunks >= 1);
    assert.equal(turn.audioBytes, 2 * kSpeechSamples, 'every sample of the talker frames arrived');
    assert.ok(turn.ttfaMs > 0 && turn.ttfaMs <= turn.totalMs, JSON.stringify(turn));
    assert.match(await page.$eval('.message.assistant [data-figure="ttfa"]', (e) => e.textContent),
                 /^TTFA \d+(\.\d)? (ms|s)$/);
    await waitForHooks(page, `window.omnirtPlayground.stats.audioFramesPlayed >= ${kSpeechSamples}`,
                       'the whole reply playing');
    ({ stats } = await hooks(page));
    assert.equal(stats.audioFramesPlayed, kSpeechSamples);
    assert.deepEqual(page.problems, []);
    await page.close();
});

test('Stop ends a spoken reply mid-stream: playback stops, the server lets go, the next turn works', async () => {
    const page = await openPlayground(browser, server);
    await page.click('label.switch');
    // A talker allowed 4000 frames (320 s) would speak for minutes: only Stop ends this turn.
    await setGeneration(page, { maxTokens: 2000, temperature: 1, seed: 1, maxFrames: 4000 });
    await page.click('#prompt');
    await page.keyboard.type('tell me a long story');
    await page.keyboard.press('Enter');
    await waitForHooks(page, () => window.omnirtPlayground.stats.audioFramesPlayed > 0, 'speech playing');
    assert.equal(await page.$eval('#send', (e) => e.textContent), 'Stop');
    await page.click('#send');
    await waitForHooks(page, () => window.omnirtPlayground.stats.turns[0].done === true, 'the turn ending');
    let { stats, state } = await hooks(page);
    assert.equal(stats.turns[0].error, 'stopped');
    assert.equal(state.busy, false);
    assert.equal(state.status, 'ready');
    assert.equal(await page.$eval('#send', (e) => e.textContent), 'Send');
    // The page dropped the connection: the server aborts the request and frees its slot (polled
    // with a hang guard).
    const deadline = Date.now() + 60_000;
    for (;;) {
        const metrics = await fetch(`${server.origin}/metrics`).then((r) => r.text());
        const inFlight = Number(/^omnirt_http_requests_in_flight (\S+)$/m.exec(metrics)?.[1]);
        if (inFlight === 0) break;
        assert.ok(Date.now() < deadline, `the stopped request still holds its slot:\n${metrics}`);
        await delay(50);
    }
    // Nothing was left queued to play after Stop.
    const played = stats.audioFramesPlayed;
    ({ stats } = await hooks(page));
    assert.equal(stats.audioFramesPlayed, played);
    await setGeneration(page, { maxTokens: 4, temperature: 0, maxFrames: 4 });
    const next = await sendMessage(page, 'and now briefly');
    ({ stats, state } = await hooks(page));
    assert.equal(stats.turns[next].error, null);
    assert.ok(stats.turns[next].audioBytes > 0);
    assert.ok(stats.audioFramesPlayed >= played);
    assert.deepEqual(page.problems, []);
    await page.close();
});
