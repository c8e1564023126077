// Server voice activity detection of the realtime API with the real Silero VAD v5 model (the
// file the setup caches; the test skips, saying so, without it), on the demo pipeline: a spoken
// recording (espeak-ng, tests/vad/goldens) streamed like a microphone is detected, committed and
// answered without any commit from the client; speech during an answer cancels it (barge-in) in
// every stage; turn_detection's fields change what is detected.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startServer, repoRoot } from './server.mjs';
import { parseWav, pcm16Samples, waitUntilIdle } from './helpers.mjs';
import { RealtimeClient } from './realtime_client.mjs';

const vadModel = path.join(process.env.OMNIRT_CACHE_DIR || path.join(os.homedir(), '.cache', 'omnirt'),
                           'silero_vad', 'silero_vad_v5.onnx');
const skip = existsSync(vadModel) ? false : `no Silero VAD model at ${vadModel} (scripts/fetch_vad_model.sh)`;

let server;

before(async () => {
    if (skip) return;
    server = await startServer({ args: ['--vad-model', vadModel] });
});

after(async () => {
    await server?.stop();
});

// speech_a.wav (16 kHz) as 24 kHz pcm16, by linear interpolation.
function speech24k() {
    const wav = parseWav(readFileSync(path.join(repoRoot, 'tests', 'vad', 'goldens', 'speech_a.wav')));
    assert.equal(wav.sampleRate, 16000);
    const input = pcm16Samples(wav.data);
    const out = new Int16Array(Math.floor(input.length * 1.5));
    for (let i = 0; i < out.length; ++i) {
        const x = i / 1.5;
        const j = Math.floor(x);
        const next = input[Math.min(j + 1, input.length - 1)];
        out[i] = Math.round(input[j] + (next - input[j]) * (x - j));
    }
    return out;
}

function silence(ms) {
    return new Int16Array(ms * 24);
}

// Appends `samples` in 40 ms pieces (as fast as the socket takes them: the server's clock is
// the audio, not the wall).
function stream(rt, samples) {
    for (let at = 0; at < samples.length; at += 960) {
        const piece = samples.subarray(at, at + 960);
        rt.send({ type: 'input_audio_buffer.append',
                  audio: Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength).toString('base64') });
    }
}

async function session() {
    const rt = await RealtimeClient.connect(server);
    const created = await rt.next('session.created');
    assert.equal(created.session.audio.input.turn_detection.type, 'server_vad');
    return rt;
}

test('a spoken turn is detected, committed and answered', { skip }, async () => {
    const rt = await session();
    rt.send({ type: 'session.update', session: { output_modalities: ['text'] } });
    await rt.next('session.updated');
    stream(rt, silence(500));
    stream(rt, speech24k());
    stream(rt, silence(1000));
    const started = await rt.next('input_audio_buffer.speech_started');
    const stopped = await rt.next('input_audio_buffer.speech_stopped');
    // The recording's speech runs from about 0.1 s to 1.9 s (tests/vad: started@96, stopped@1920
    // at 16 kHz); here it starts after 500 ms of silence.
    assert.ok(started.audio_start_ms >= 500 && started.audio_start_ms < 800, JSON.stringify(started));
    assert.ok(stopped.audio_end_ms > 2000 && stopped.audio_end_ms < 2700, JSON.stringify(stopped));
    assert.equal(stopped.item_id, started.item_id);
    const committed = await rt.next('input_audio_buffer.committed');
    assert.equal(committed.item_id, started.item_id);
    const done = await rt.next('response.done');
    assert.equal(done.response.status, 'completed');
    assert.equal(rt.all('response.output_text.delta').map((e) => e.delta).join(''),
                 'You said nothing. (1 audio clip)');
    // The committed audio: prefix padding (300 ms) + the speech, not the silence around it.
    rt.send({ type: 'conversation.item.retrieve', item_id: committed.item_id });
    const item = await rt.next('conversation.item.retrieved');
    const ms = Buffer.from(item.item.content[0].audio, 'base64').length / 48;
    assert.ok(Math.abs(ms - (stopped.audio_end_ms - started.audio_start_ms + 300)) <= 1, `${ms} ms committed`);
    assert.equal(rt.all('error').length, 0);
    await rt.close();
});

test('speech during an answer cancels it in every stage (barge-in)', { skip }, async () => {
    const rt = await session();
    // A slow answer: the demo thinker waits 300 ms between tokens.
    rt.send({ type: 'session.update', session: { stage_params: { thinker: { token_delay_ms: 300 } } } });
    await rt.next('session.updated');
    stream(rt, speech24k());
    stream(rt, silence(800));
    await rt.next('response.created');
    await rt.next('response.output_audio.delta');
    stream(rt, speech24k());  // the user talks over the answer
    await rt.next('input_audio_buffer.speech_started');
    const done = await rt.next('response.done');
    assert.equal(done.response.status, 'cancelled');
    assert.equal(done.response.status_details.reason, 'turn_detected');
    assert.equal(done.response.output[0].status, 'incomplete');
    await rt.close();
    await waitUntilIdle(server);
});

test('turn_detection fields change the turns; null turns detection off', { skip }, async () => {
    const rt = await session();
    rt.send({ type: 'session.update', session: { output_modalities: ['text'], audio: { input: {
        turn_detection: { type: 'server_vad', silence_duration_ms: 1500, create_response: false } } } } });
    const updated = await rt.next('session.updated');
    assert.equal(updated.session.audio.input.turn_detection.silence_duration_ms, 1500);
    // Under a second of silence between two utterances (the recording's own tail and 300 ms):
    // one turn with a 1.5 s silence_duration_ms (the default 500 ms would make two).
    stream(rt, speech24k());
    stream(rt, silence(300));
    stream(rt, speech24k());
    stream(rt, silence(2000));
    await rt.next('input_audio_buffer.committed');
    assert.equal(rt.all('input_audio_buffer.speech_started').length, 1);
    assert.equal(rt.all('response.created').length, 0, 'create_response false: no answer');
    rt.send({ type: 'session.update', session: { audio: { input: { turn_detection: null } } } });
    await rt.next('session.updated');
    stream(rt, speech24k());
    stream(rt, silence(1000));
    rt.send({ type: 'input_audio_buffer.commit' });
    await rt.next('input_audio_buffer.committed');
    assert.equal(rt.all('input_audio_buffer.speech_started').length, 1, 'no detection when off');
    await rt.close();
});
