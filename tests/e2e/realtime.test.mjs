// The realtime API (GET /v1/realtime, docs/realtime.md) over WebSocket with the `ws` client, on
// the demo pipeline: the session, conversation items, responses with streamed audio and
// transcript, audio input committed by hand, cancel, truncate, delete, the beta event names, and
// every hostile input: malformed JSON, unknown events, binary frames, bad audio, oversize
// messages, a client that never reads. Each gets an error event or a clean close, and the server
// keeps serving others. Voice activity detection is tested in realtime_vad.test.mjs.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { startServer } from './server.mjs';
import { waitUntilIdle } from './helpers.mjs';
import { pcmStats, RealtimeClient, toneBase64 } from './realtime_client.mjs';

let server;

before(async () => {
    server = await startServer({ args: ['--api-key', 'rt-key', '--vad-model', 'none'] });
});

after(async () => {
    await server?.stop();
});

const auth = { headers: { Authorization: 'Bearer rt-key' } };

async function session() {
    const rt = await RealtimeClient.connect(server, auth);
    await rt.next('session.created');
    return rt;
}

async function say(rt, text) {
    rt.send({ type: 'conversation.item.create',
              item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
    const added = await rt.next('conversation.item.added');
    await rt.next('conversation.item.done');
    return added.item.id;
}

test('session.created, then session.update is answered with the whole session', async () => {
    const rt = await RealtimeClient.connect(server, auth);
    const created = await rt.next('session.created');
    assert.equal(created.session.type, 'realtime');
    assert.equal(created.session.model, 'demo');
    assert.deepEqual(created.session.audio.input.format, { type: 'audio/pcm', rate: 24000 });
    assert.equal(created.session.audio.input.turn_detection, null, 'no VAD model: manual turns');
    rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.',
              output_modalities: ['text'], audio: { output: { voice: 'alloy' } } } });
    const updated = await rt.next('session.updated');
    assert.equal(updated.session.instructions, 'Be brief.');
    assert.deepEqual(updated.session.output_modalities, ['text']);
    assert.equal(updated.session.audio.output.voice, 'alloy');
    await rt.close();
});

test('a text turn streams transcript and audio deltas, then response.done with usage', async () => {
    const rt = await session();
    const userItem = await say(rt, 'hello there');
    rt.send({ type: 'response.create' });
    const created = await rt.next('response.created');
    assert.equal(created.response.status, 'in_progress');
    const itemAdded = await rt.next('response.output_item.added');
    assert.equal(itemAdded.item.role, 'assistant');
    const conversationAdded = await rt.next('conversation.item.added');
    assert.equal(conversationAdded.previous_item_id, userItem);
    await rt.next('response.content_part.added');
    const done = await rt.next('response.done');
    assert.equal(done.response.status, 'completed');
    assert.ok(done.response.usage.input_tokens > 0);
    assert.ok(done.response.usage.output_tokens > 0);
    const transcript = rt.all('response.output_audio_transcript.delta').map((e) => e.delta).join('');
    assert.equal(transcript, 'You said: hello there.');
    assert.equal(rt.all('response.output_audio_transcript.done')[0].transcript, transcript);
    const audio = pcmStats(rt.all('response.output_audio.delta').map((e) => e.delta));
    assert.ok(audio.samples > 0 && audio.nonzero, 'speech audio streamed');
    assert.equal(done.response.output[0].content[0].transcript, transcript);
    // Order: every delta before its done events, response.done last.
    const types = rt.types();
    assert.ok(types.lastIndexOf('response.output_audio.delta') < types.indexOf('response.output_audio.done'));
    assert.equal(types.at(-1), 'response.done');
    await rt.close();
});

test('text-only responses stream response.output_text.delta and no audio', async () => {
    const rt = await session();
    await say(rt, 'just text');
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const done = await rt.next('response.done');
    assert.equal(done.response.status, 'completed');
    assert.equal(rt.all('response.output_text.delta').map((e) => e.delta).join(''), 'You said: just text.');
    assert.equal(rt.all('response.output_audio.delta').length, 0);
    assert.equal(rt.all('response.output_text.done')[0].text, 'You said: just text.');
    await rt.close();
});

test('audio appended and committed by hand reaches the pipeline as an audio clip', async () => {
    const rt = await session();
    for (let i = 0; i < 5; ++i) rt.send({ type: 'input_audio_buffer.append', audio: toneBase64({ seconds: 0.1 }) });
    rt.send({ type: 'input_audio_buffer.commit' });
    const committed = await rt.next('input_audio_buffer.committed');
    const added = await rt.next('conversation.item.added');
    assert.equal(added.item.id, committed.item_id);
    assert.equal(added.item.content[0].type, 'input_audio');
    rt.send({ type: 'conversation.item.retrieve', item_id: committed.item_id });
    const retrieved = await rt.next('conversation.item.retrieved');
    assert.equal(Buffer.from(retrieved.item.content[0].audio, 'base64').length, 24000 * 2 * 0.5);
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    await rt.next('response.done');
    assert.equal(rt.all('response.output_text.delta').map((e) => e.delta).join(''),
                 'You said nothing. (1 audio clip)');
    await rt.close();
});

test('an empty or short commit, and clear, are answered', async () => {
    const rt = await session();
    rt.send({ type: 'input_audio_buffer.append', audio: toneBase64({ seconds: 0.05 }) });
    rt.send({ type: 'input_audio_buffer.commit', event_id: 'short' });
    const error = await rt.next('error');
    assert.equal(error.error.code, 'input_audio_buffer_commit_empty');
    assert.equal(error.error.event_id, 'short');
    rt.send({ type: 'input_audio_buffer.clear' });
    await rt.next('input_audio_buffer.cleared');
    await rt.close();
});

test('hostile events get error events naming the event and the field; the session goes on', async () => {
    const rt = await session();
    const cases = [
        ['{not json', 'invalid_json', null],
        [JSON.stringify([1, 2]), 'invalid_event', null],
        [{ type: 'no.such.event', event_id: 'e1' }, 'invalid_event', 'type'],
        [{ event_id: 'e2' }, 'invalid_event', 'type'],
        [{ type: 'input_audio_buffer.append', audio: '***', event_id: 'e3' }, 'invalid_value', 'audio'],
        [{ type: 'input_audio_buffer.append', audio: 'AA==', event_id: 'e4' }, 'invalid_value', 'audio'],
        [{ type: 'input_audio_buffer.append', event_id: 'e5' }, 'missing_required_parameter', 'audio'],
        [{ type: 'session.update', session: { audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } },
         'invalid_value', 'session.audio.input.format.rate'],
        [{ type: 'session.update', session: { audio: { input: { format: { type: 'audio/pcmu' } } } } },
         'invalid_value', 'session.audio.input.format.type'],
        [{ type: 'session.update', session: { input_audio_format: 'g711_ulaw' } },
         'invalid_value', 'session.input_audio_format'],
        [{ type: 'session.update', session: { audio: { input: { turn_detection: { type: 'server_vad' } } } } },
         'invalid_value', 'session.audio.input.turn_detection'],
        [{ type: 'session.update', session: { tools: [{ type: 'function', name: 'f' }] } },
         'invalid_value', 'session.tools'],
        [{ type: 'session.update', session: { output_modalities: ['smell'] } },
         'invalid_value', 'session.output_modalities'],
        [{ type: 'session.update', session: 'x' }, 'invalid_value', 'session'],
        [{ type: 'conversation.item.create', item: { type: 'function_call_output' } },
         'invalid_value', 'item.type'],
        [{ type: 'conversation.item.create', item: { role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] } },
         'invalid_value', 'item.content[0].image_url'],
        [{ type: 'conversation.item.create', item: { role: 'robot', content: [] } }, 'invalid_value', 'item.role'],
        [{ type: 'conversation.item.create', previous_item_id: 'nope', item: { role: 'user', content: [] } },
         'item_not_found', 'previous_item_id'],
        [{ type: 'conversation.item.retrieve', item_id: 'nope' }, 'item_not_found', 'item_id'],
        [{ type: 'conversation.item.delete', item_id: 'nope' }, 'item_not_found', 'item_id'],
        [{ type: 'conversation.item.truncate', item_id: 'nope', content_index: 0, audio_end_ms: 0 },
         'item_not_found', 'item_id'],
        [{ type: 'response.cancel' }, 'response_cancel_not_active', null],
        [{ type: 'response.create', response: { max_output_tokens: 0 } }, 'invalid_value', 'response.max_output_tokens'],
        [{ type: 'response.create', response: { audio: { output: { voice: 7 } } } }, 'invalid_value',
         'response.audio.output.voice'],
        [{ type: 'response.create' }, 'invalid_value', 'response'],  // nothing to respond to yet
    ];
    for (const [event, code, param] of cases) {
        rt.send(event);
        const error = await rt.next('error');
        assert.equal(error.error.code, code, JSON.stringify(event));
        assert.equal(error.error.param, param, JSON.stringify(event));
        if (typeof event === 'object' && event.event_id) assert.equal(error.error.event_id, event.event_id);
        assert.ok(error.error.message.length > 0);
    }
    rt.socket.send(Buffer.from([1, 2, 3]), { binary: true });
    assert.equal((await rt.next('error')).error.code, 'invalid_event');
    // Still a working session.
    await say(rt, 'still here');
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    assert.equal((await rt.next('response.done')).response.status, 'completed');
    await rt.close();
});

test('one response at a time; response.cancel ends it in every stage', async () => {
    const rt = await session();
    await say(rt, 'a long answer please');
    const slow = { stage_params: { thinker: { token_delay_ms: 2000 } } };
    rt.send({ type: 'response.create', response: slow });
    const created = await rt.next('response.created');
    rt.send({ type: 'response.create', event_id: 'second' });
    const busy = await rt.next('error');
    assert.equal(busy.error.code, 'conversation_already_has_active_response');
    rt.send({ type: 'response.cancel', response_id: created.response.id });
    const done = await rt.next('response.done');
    assert.equal(done.response.status, 'cancelled');
    assert.equal(done.response.status_details.reason, 'client_cancelled');
    await waitUntilIdle(server);
    // The next response runs.
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    assert.equal((await rt.next('response.done')).response.status, 'completed');
    await rt.close();
});

test('truncate keeps the audio the client played; delete removes an item', async () => {
    const rt = await session();
    await say(rt, 'tell me something');
    rt.send({ type: 'response.create' });
    const done = await rt.next('response.done');
    const itemId = done.response.output[0].id;
    rt.send({ type: 'conversation.item.retrieve', item_id: itemId });
    const full = await rt.next('conversation.item.retrieved');
    const fullBytes = Buffer.from(full.item.content[0].audio, 'base64').length;
    assert.ok(fullBytes > 4800, 'more than 100 ms of audio');
    rt.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 100 });
    const truncated = await rt.next('conversation.item.truncated');
    assert.equal(truncated.audio_end_ms, 100);
    rt.send({ type: 'conversation.item.retrieve', item_id: itemId });
    const cut = await rt.next('conversation.item.retrieved');
    assert.equal(Buffer.from(cut.item.content[0].audio, 'base64').length, 4800);
    rt.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: 60_000 });
    assert.equal((await rt.next('error')).error.param, 'audio_end_ms');
    rt.send({ type: 'conversation.item.delete', item_id: itemId });
    assert.equal((await rt.next('conversation.item.deleted')).item_id, itemId);
    rt.send({ type: 'conversation.item.retrieve', item_id: itemId });
    assert.equal((await rt.next('error')).error.code, 'item_not_found');
    await rt.close();
});

test('the beta protocol gets the beta event names', async () => {
    const rt = await RealtimeClient.connect(server, {
        headers: { Authorization: 'Bearer rt-key', 'OpenAI-Beta': 'realtime=v1' } });
    const created = await rt.next('session.created');
    assert.deepEqual(created.session.modalities, ['audio']);
    rt.send({ type: 'session.update', session: { modalities: ['text', 'audio'], voice: 'alloy',
                                                  input_audio_format: 'pcm16', turn_detection: null } });
    await rt.next('session.updated');
    rt.send({ type: 'conversation.item.create',
              item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'beta' }] } });
    await rt.next('conversation.item.created');
    rt.send({ type: 'response.create' });
    await rt.next('response.done');
    assert.ok(rt.all('response.audio.delta').length > 0);
    assert.equal(rt.all('response.audio_transcript.delta').map((e) => e.delta).join(''), 'You said: beta.');
    assert.equal(rt.all('response.output_audio.delta').length, 0);
    await rt.close();
});

test('the API key: refused without it, accepted as a header or a subprotocol', async () => {
    await assert.rejects(RealtimeClient.connect(server), (error) => error.status === 401);
    await assert.rejects(RealtimeClient.connect(server, { headers: { Authorization: 'Bearer wrong' } }),
                         (error) => error.status === 401);
    const rt = await RealtimeClient.connect(server, {
        protocols: ['realtime', 'openai-insecure-api-key.rt-key'] });
    assert.equal(rt.socket.protocol, 'realtime');
    await rt.next('session.created');
    await rt.close();
    await assert.rejects(RealtimeClient.connect(server, { ...auth, query: '?model=other' }),
                         (error) => error.status === 404);
    const plain = await fetch(`${server.origin}/v1/realtime`, { headers: auth.headers });
    assert.equal(plain.status, 426);
});

test('an oversize message closes that socket with 1009; others are served', async () => {
    const big = await session();
    const other = await session();
    big.send({ type: 'input_audio_buffer.append', audio: 'A'.repeat(17 << 20) });
    const closed = await big.closed;
    assert.equal(closed.code, 1009);
    await say(other, 'after the big one');
    await other.close();
});

test('a client that never reads is cut off; others are served', async () => {
    const rt = await session();
    // 8 MB of audio in one item, then retrieves of it (each ~11 MB of base64) without reading.
    const audio = toneBase64({ seconds: 160 });
    rt.send({ type: 'input_audio_buffer.append', audio: audio.slice(0, 4 << 20) });
    rt.send({ type: 'input_audio_buffer.append', audio: audio.slice(4 << 20, 8 << 20) });
    rt.send({ type: 'input_audio_buffer.append', audio: audio.slice(8 << 20, 12 << 20) });
    rt.send({ type: 'input_audio_buffer.commit' });
    const committed = await rt.next('input_audio_buffer.committed');
    rt.socket._socket.pause();  // stop reading at the TCP level
    for (let i = 0; i < 12; ++i) rt.send({ type: 'conversation.item.retrieve', item_id: committed.item_id });
    const other = await session();
    await say(other, 'someone else');
    await other.close();
    rt.socket._socket.resume();
    const closed = await rt.closed;
    assert.ok(closed.code === 1006 || closed.code === 1008, `closed with ${closed.code}`);
});

test('closing the socket mid-response frees the pipeline', async () => {
    const rt = await session();
    await say(rt, 'a long answer please');
    rt.send({ type: 'response.create', response: { stage_params: { thinker: { token_delay_ms: 2000 } } } });
    await rt.next('response.created');
    await rt.close();
    await waitUntilIdle(server);
});
