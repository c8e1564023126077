// The playground on a server with --api-key: the page itself is public, its API calls are not;
// the key typed into the page goes with every call.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startServer } from '../e2e/server.mjs';
import { hooks, launchBrowser, openPlayground, sendMessage, setGeneration, waitForHooks } from './browser.mjs';

const kKey = 'sk-browser-test';

let dir;
let server;
let browser;

before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'omnirt-browser-key-'));
    server = await startServer({
        pipeline: 'default', args: ['--api-key', kKey], env: { OMNIRT_CACHE_DIR: dir },
        startTimeoutMs: 120_000,
    });
    browser = await launchBrowser();
});

after(async () => {
    await browser?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
});

test('the page is public; its API calls need the key the user enters', async () => {
    for (const route of ['/', '/playground/app.js', '/playground/playground.css']) {
        assert.equal((await fetch(`${server.origin}${route}`)).status, 200, route);
    }
    assert.equal((await fetch(`${server.origin}/v1/audio/voices`)).status, 401);

    const page = await openPlayground(browser, server);
    let { state, errors } = await hooks(page);
    assert.equal(state.model, '');
    assert.match(errors.at(-1), /API key/);
    // The browser logs the 401 of GET /v1/models; that is the only complaint.
    assert.ok(page.problems.every((p) => /401/.test(p)), page.problems.join('\n'));
    page.problems.length = 0;

    await page.type('#api-key', kKey);
    await page.keyboard.press('Tab');  // `change` reloads the server info with the key
    await waitForHooks(page, () => window.omnirtPlayground.state.status === 'ready', 'the key accepted');
    ({ state } = await hooks(page));
    assert.equal(state.model, 'qwen3-omni-speech');
    assert.deepEqual(state.voices, ['aiden', 'chelsie', 'ethan']);

    await setGeneration(page, { maxTokens: 4, temperature: 0 });
    const index = await sendMessage(page, 'hello');
    const { stats } = await hooks(page);
    assert.equal(stats.turns[index].error, null);
    assert.equal(stats.turns[index].usage.completion_tokens, 4);
    assert.deepEqual(page.problems, []);
});

test('a voice session without the key is refused, and the page says so', async () => {
    const page = await openPlayground(browser, server);
    page.problems.length = 0;
    await page.click('#mic');
    await waitForHooks(page, () => window.omnirtPlayground.errors.some((e) => /realtime/.test(e)) &&
                                   window.omnirtPlayground.state.realtime === 'off',
                       'the refused session shown');
    const { errors } = await hooks(page);
    assert.match(errors.find((e) => /realtime/.test(e)), /\/v1\/realtime/);
    // The browser logs the refused WebSocket handshake (401); nothing else may go wrong.
    assert.deepEqual(page.problems.filter((p) => !/WebSocket connection to .* failed|401/.test(p)), []);
    await page.close();
});
