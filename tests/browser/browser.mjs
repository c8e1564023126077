// Headless chromium for the playground tests, through puppeteer-core.
//
//   const browser = await launchBrowser({ micFile: '/tmp/speech.wav' });
//   const page = await openPlayground(browser, server);   // loaded, hooks ready
//   ... page.evaluate(() => window.omnirtPlayground.stats) ...
//   assert.deepEqual(page.problems, []);                   // console errors, page errors
//   await browser.close();
//
// The browser is $CHROMIUM_BIN, else the first of chromium / chromium-browser / google-chrome on
// PATH. Media permissions are granted without a prompt, the microphone is a fake device (a WAV
// file played in a loop when `micFile` is given, otherwise a beep), and audio plays without a
// user gesture.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import puppeteer from 'puppeteer-core';

// Every wait of the suite gives up after this long: a hang guard, never a synchronisation.
export const kWaitTimeoutMs = 60_000;

export function chromiumBinary() {
    if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN;
    for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
        try {
            const found = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
            if (found && existsSync(found)) return found;
        } catch {
            // not on PATH
        }
    }
    return '';
}

export async function launchBrowser({ micFile } = {}) {
    const args = [
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        '--autoplay-policy=no-user-gesture-required',
        '--no-first-run',
        '--no-default-browser-check',
        '--disable-dev-shm-usage',
    ];
    if (micFile) args.push(`--use-file-for-fake-audio-capture=${micFile}`);
    // Root cannot run chromium's sandbox (CI containers run tests as root).
    if (process.getuid?.() === 0) args.push('--no-sandbox');
    return puppeteer.launch({
        executablePath: chromiumBinary(),
        headless: true,
        args,
        protocolTimeout: kWaitTimeoutMs * 2,
    });
}

// A page on the server's playground, loaded and with its hooks ready. `page.problems` collects
// what a user would see as breakage: console errors and uncaught exceptions.
export async function openPlayground(browser, server, { width = 1200, height = 760 } = {}) {
    const page = await browser.newPage();
    await page.setViewport({ width, height });
    page.setDefaultTimeout(kWaitTimeoutMs);
    page.problems = [];
    page.on('console', (message) => {
        if (message.type() === 'error') {
            const where = message.location()?.url ?? '';
            page.problems.push(`console error: ${message.text()} ${where}`.trim());
        }
    });
    page.on('pageerror', (error) => page.problems.push(`uncaught: ${error.message}`));
    const response = await page.goto(`${server.origin}/`, { waitUntil: 'load' });
    if (response.status() !== 200) throw new Error(`GET / answered ${response.status()}`);
    await page.waitForFunction(() => window.omnirtPlayground?.ready === true);
    return page;
}

// The playground's hooks (window.omnirtPlayground) as plain data.
export function hooks(page) {
    return page.evaluate(() => JSON.parse(JSON.stringify(window.omnirtPlayground)));
}

// Waits until `predicate` (a function or an expression, evaluated in the page; it reads
// window.omnirtPlayground) holds.
export async function waitForHooks(page, predicate, what) {
    try {
        await page.waitForFunction(predicate, { timeout: kWaitTimeoutMs, polling: 50 });
    } catch (error) {
        const state = await hooks(page).catch(() => ({}));
        throw new Error(`${what} did not happen within ${kWaitTimeoutMs} ms: ${error.message}\n` +
                        `hooks: ${JSON.stringify(state).slice(0, 3000)}`);
    }
}

// Sets the generation fields of the settings panel.
export async function setGeneration(page, { maxTokens, temperature, seed, maxFrames } = {}) {
    await page.evaluate((values) => {
        const set = (id, value) => {
            if (value !== undefined) document.getElementById(id).value = String(value);
        };
        set('max-tokens', values.maxTokens);
        set('temperature', values.temperature);
        set('seed', values.seed);
        set('max-frames', values.maxFrames);
    }, { maxTokens, temperature, seed, maxFrames });
}

// Types `text` into the composer and presses Enter; resolves with the index of the new turn.
export async function sendMessage(page, text) {
    const index = await page.evaluate(() => window.omnirtPlayground.stats.turns.length);
    await page.click('#prompt');
    await page.keyboard.type(text);
    await page.keyboard.press('Enter');
    await waitForHooks(page, `window.omnirtPlayground.stats.turns[${index}]?.done === true`,
                       `turn ${index} finishing`);
    return index;
}
