// SIGTERM drains: a stream in flight when the signal arrives runs to its end, then the server
// exits 0.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { startServer } from './server.mjs';
import { openaiClient } from './helpers.mjs';

let server;
let client;

before(async () => {
    server = await startServer();
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

test('SIGTERM during a stream: the stream completes, the server exits 0', async () => {
    const words = Array.from({ length: 10 }, (_, i) => `w${i}`).join(' ');
    const stream = await client.chat.completions.create({
        model: 'demo', messages: [{ role: 'user', content: words }], stream: true,
        stage_params: { thinker: { token_delay_ms: 100 } },
    });
    const iterator = stream[Symbol.asyncIterator]();
    let text = '';
    let last;
    for (;;) {
        const { value, done } = await iterator.next();
        assert.equal(done, false, 'the stream ended before its first word');
        text += value.choices[0]?.delta?.content ?? '';
        if (text !== '') break;
    }
    const stopped = server.stop();  // SIGTERM, resolves when the server exited 0
    for (;;) {
        const { value, done } = await iterator.next();
        if (done) break;
        text += value.choices[0]?.delta?.content ?? '';
        last = value;
    }
    assert.equal(text, `You said: ${words}.`);
    assert.equal(last?.choices[0]?.finish_reason, 'stop');
    await stopped;
});
