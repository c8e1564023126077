// Takes the screenshots of docs/playground.md with headless chromium:
//
//   node tests/browser/screenshots.mjs        # writes docs/images/playground-*.png
//
// The shots are of the real `omnirt serve` (the Qwen3-Omni speech pipeline on the tiny checkpoint:
// random weights, so the words are arbitrary, the figures real), the voice one with the server
// VAD of the model the setup cached.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { repoRoot, startServer } from '../e2e/server.mjs';
import { makeWav } from '../e2e/media_files.mjs';
import { launchBrowser, openPlayground, sendMessage, setGeneration, waitForHooks } from './browser.mjs';
import { makeSpeechWav } from './speech_wav.mjs';

const out = path.join(repoRoot, 'docs', 'images');
const size = { width: 1100, height: 640 };

// A 24-bit BMP of a soft diagonal gradient (a friendlier thumbnail than noise).
function gradientBmp(width, height) {
    const stride = Math.ceil((width * 3) / 4) * 4;
    const bmp = Buffer.alloc(54 + stride * height);
    bmp.write('BM', 0);
    bmp.writeUInt32LE(bmp.length, 2);
    bmp.writeUInt32LE(54, 10);
    bmp.writeUInt32LE(40, 14);
    bmp.writeInt32LE(width, 18);
    bmp.writeInt32LE(height, 22);
    bmp.writeUInt16LE(1, 26);
    bmp.writeUInt16LE(24, 28);
    for (let y = 0; y < height; ++y) {
        for (let x = 0; x < width; ++x) {
            const o = 54 + y * stride + 3 * x;
            bmp[o] = 200 + Math.round((55 * y) / height);        // blue
            bmp[o + 1] = 90 + Math.round((120 * x) / width);     // green
            bmp[o + 2] = 60 + Math.round((80 * (x + y)) / (width + height));  // red
        }
    }
    return bmp;
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-shots-'));
const vadModel = path.join(process.env.OMNIRT_CACHE_DIR || path.join(os.homedir(), '.cache', 'omnirt'),
                           'silero_vad', 'silero_vad_v5.onnx');
const server = await startServer({ pipeline: 'default', args: ['--vad-model', vadModel],
                                   env: { OMNIRT_CACHE_DIR: dir }, startTimeoutMs: 120_000 });
const browser = await launchBrowser({ micFile: makeSpeechWav(dir) });
try {
    // 1. A chat: a text turn, then a spoken one.
    let page = await openPlayground(browser, server, size);
    await setGeneration(page, { maxTokens: 600, temperature: 1, seed: 2 });
    await sendMessage(page, 'Hello! Tell me something about the sea.');
    await page.click('label.switch');
    await page.select('#voice', 'chelsie');
    await setGeneration(page, { maxTokens: 300, temperature: 1, seed: 3, maxFrames: 25 });
    await sendMessage(page, 'Now say it out loud.');
    await page.screenshot({ path: path.join(out, 'playground-chat.png') });
    await page.close();

    // 2. Attachments: an image and an audio clip, sent, and the next ones waiting in the composer.
    page = await openPlayground(browser, server, size);
    const image = path.join(dir, 'gradient.bmp');
    const clip = path.join(dir, 'tone.wav');
    await writeFile(image, gradientBmp(160, 110));
    await writeFile(clip, makeWav({ seconds: 1.5 }));
    await setGeneration(page, { maxTokens: 400, temperature: 1, seed: 2 });
    await (await page.$('#file')).uploadFile(image, clip);
    await waitForHooks(page, () => document.querySelectorAll('#attachments li').length === 2, 'attachments');
    await sendMessage(page, 'What do you see and hear?');
    await (await page.$('#file')).uploadFile(image);
    await waitForHooks(page, () => document.querySelectorAll('#attachments li').length === 1, 'attachment');
    await page.type('#prompt', 'And in this one?');
    await page.evaluate(() => { document.querySelector('details.advanced').open = true; });
    await page.screenshot({ path: path.join(out, 'playground-attachments.png') });
    await page.close();

    // 3. A voice session: a turn, its TTFA, the event log.
    page = await openPlayground(browser, server, size);
    await page.select('#voice', 'ethan');
    await setGeneration(page, { maxTokens: 16, temperature: 0, maxFrames: 25 });
    await page.click('#mic');
    await waitForHooks(page, () => window.omnirtPlayground.stats.turns[0]?.done === true, 'a voice turn');
    await page.evaluate(() => { document.querySelector('details.events').open = true; });
    await page.screenshot({ path: path.join(out, 'playground-voice.png') });
    await page.close();
} finally {
    await browser.close();
    await server.stop();
    await rm(dir, { recursive: true, force: true });
}
console.log(`screenshots written to ${out}`);
