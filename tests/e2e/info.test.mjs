// GET /health, GET /v1/models, GET /v1/audio/voices, GET /metrics and the playground's files.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { startServer } from './server.mjs';
import { curl, fetchMetrics, findSamples, mediaType, openaiClient, pollUntil } from './helpers.mjs';

const kModel = 'demo';
const kStages = ['decode', 'talker', 'thinker'];

let server;
let client;

before(async () => {
    server = await startServer();
    client = openaiClient(server);
});

after(async () => {
    await server?.stop();
});

// The per-stage entries of a /health body: `stages` as a list of objects naming their stage
// (`stage` or `name`), or as an object keyed by stage.
function healthStages(health) {
    assert.ok(health.stages && typeof health.stages === 'object',
              `/health has per-stage state in 'stages': ${JSON.stringify(health)}`);
    if (Array.isArray(health.stages)) {
        return Object.fromEntries(health.stages.map((entry) => [entry.stage ?? entry.name, entry]));
    }
    return health.stages;
}

test('GET /health: 200, status ok, every stage alive', async () => {
    const response = await curl({ url: `${server.origin}/health` });
    assert.equal(response.status, 200);
    assert.equal(mediaType(response.headers['content-type']), 'application/json');
    const health = JSON.parse(response.body.toString());
    assert.equal(health.status, 'ok');
    const stages = healthStages(health);
    assert.deepEqual(Object.keys(stages).sort(), kStages);
    for (const [name, stage] of Object.entries(stages)) {
        assert.equal(typeof stage, 'object', `stage ${name}: ${JSON.stringify(stage)}`);
        if ('alive' in stage) assert.equal(stage.alive, true, `stage ${name} is alive`);
    }
});

test('GET /v1/models lists the model', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    assert.equal(models.length, 1);
    assert.equal(models[0].id, kModel);
    assert.equal(models[0].object, 'model');
    assert.equal(typeof models[0].created, 'number');
    assert.equal(typeof models[0].owned_by, 'string');
});

test('GET /v1/audio/voices: the demo model lists none', async () => {
    const response = await curl({ url: `${server.origin}/v1/audio/voices` });
    assert.equal(response.status, 200);
    assert.equal(mediaType(response.headers['content-type']), 'application/json');
    assert.deepEqual(JSON.parse(response.body.toString()), { voices: [] });
});

// The page's behaviour is tested in a browser (tests/browser); here only how it is served.
test('GET / and /playground/*: the playground, built in, with its content types', async () => {
    const page = await curl({ url: `${server.origin}/` });
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(page.headers['cache-control'], 'no-cache');
    assert.match(page.headers['content-security-policy'], /default-src 'self'/);
    const html = page.body.toString();
    assert.match(html, /<title>omnirt playground<\/title>/);
    for (const [file, type] of [['app.js', 'text/javascript; charset=utf-8'],
                                ['mic_capture_worklet.js', 'text/javascript; charset=utf-8'],
                                ['playground.css', 'text/css; charset=utf-8']]) {
        const asset = await curl({ url: `${server.origin}/playground/${file}` });
        assert.equal(asset.status, 200, file);
        assert.equal(asset.headers['content-type'], type, file);
        assert.equal(asset.headers['x-content-type-options'], 'nosniff', file);
        assert.ok(asset.body.length > 100, file);
    }
    assert.equal((await curl({ url: `${server.origin}/playground/missing.js` })).status, 404);
    assert.equal((await curl({ method: 'POST', url: `${server.origin}/`, body: '{}' })).status, 405);
});

test('GET /metrics: Prometheus text with request counts and stage gauges', async () => {
    const completion = await client.chat.completions.create({
        model: kModel, messages: [{ role: 'user', content: 'hello there' }],
    });
    assert.equal(completion.choices[0].message.content, 'You said: hello there.');
    const stream = await client.chat.completions.create({
        model: kModel, messages: [{ role: 'user', content: 'hello there' }], stream: true,
    });
    for await (const chunk of stream) assert.ok(chunk);

    const raw = await curl({ url: `${server.origin}/metrics` });
    assert.equal(raw.status, 200);
    assert.equal(mediaType(raw.headers['content-type']), 'text/plain');
    assert.match(raw.body.toString(), /^# TYPE omnirt_http_requests_total counter$/m);

    // A response is counted when the server has finished it, which may be just after the client
    // read its end: poll.
    const samples = await pollUntil(async () => {
        const now = await fetchMetrics(server);
        const chats = findSamples(now, 'omnirt_http_requests_total',
                                  { endpoint: '/v1/chat/completions', status: '200' });
        return chats.length === 1 && chats[0].value >= 2 ? now : false;
    }, { timeoutMs: 30_000, what: 'omnirt_http_requests_total{endpoint="/v1/chat/completions",status="200"} >= 2' });

    assert.equal(findSamples(samples, 'omnirt_pipeline_healthy')[0]?.value, 1);
    const alive = findSamples(samples, 'omnirt_stage_alive');
    assert.deepEqual(alive.map((sample) => sample.labels.stage).sort(), kStages);
    assert.ok(alive.every((sample) => sample.value === 1), 'every stage alive');
    assert.deepEqual(findSamples(samples, 'omnirt_stage_active_requests')
        .map((sample) => sample.labels.stage).sort(), kStages);
    const firstToken = findSamples(samples, 'omnirt_time_to_first_token_seconds_count')[0];
    assert.ok(firstToken && firstToken.value >= 1, 'time to first token observed');
});

test('omnirt_stage_processed_total: a text chat reaches thinker and decode, speech the talker', async () => {
    const processed = async (stage) => findSamples(await fetchMetrics(server),
                                                   'omnirt_stage_processed_total', { stage })[0]?.value ?? 0;
    const before = { thinker: await processed('thinker'), decode: await processed('decode'),
                     talker: await processed('talker') };
    await client.chat.completions.create({ model: kModel, messages: [{ role: 'user', content: 'hi' }] });
    // Stage counters arrive with the stages' heartbeats: poll.
    for (const stage of ['thinker', 'decode']) {
        await pollUntil(async () => (await processed(stage)) > before[stage],
                        { timeoutMs: 30_000, what: `omnirt_stage_processed_total{stage="${stage}"} grows` });
    }
    const speech = await client.audio.speech.create({ model: kModel, voice: 'alloy', input: 'hi' });
    await speech.arrayBuffer();
    await pollUntil(async () => (await processed('talker')) > before.talker,
                    { timeoutMs: 30_000, what: 'omnirt_stage_processed_total{stage="talker"} grows' });
});
