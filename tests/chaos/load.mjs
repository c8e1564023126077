// The requests of the chaos and soak suites against the demo pipeline (docs/demo_pipeline.md):
// chat completions with and without streaming, with audio (thinker and talker), speech, a client
// that disconnects mid-stream and one that reads slowly. Every request ends in one outcome:
//
//   ok        the full, correct answer ("You said: <input>." for text)
//   error     an answer that says it failed: an HTTP error with an OpenAI error body, or a
//             stream that ends with an error event
//   aborted   the client disconnected on purpose (the disconnect kind)
//   lost      anything else: no answer within the hang guard, a connection reset without an
//             error, a truncated stream, a wrong answer. A chaos run passes only with none.
import { setTimeout as delay } from 'node:timers/promises';

export const kModel = 'demo';
export const kKinds = ['chat', 'chat_stream', 'chat_audio_stream', 'speech', 'disconnect',
                       'slow_reader'];

function words(random, count) {
    return Array.from({ length: count }, () => `w${Math.floor(random() * 1000)}`).join(' ');
}

// A stream's SSE `data:` payloads, as they arrive; `onEvent` returns false to stop reading.
async function readSse(response, onEvent, { pauseMs = 0 } = {}) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            for (const line of block.split('\n')) {
                if (!line.startsWith('data:')) continue;
                if (onEvent(line.slice(5).trim()) === false) {
                    await reader.cancel();
                    return;
                }
            }
        }
        if (pauseMs > 0) await delay(pauseMs);
    }
}

async function errorOutcome(response, kind) {
    const text = await response.text();
    let body = null;
    try {
        body = JSON.parse(text);
    } catch {
        // not JSON
    }
    if (body?.error?.message) {
        return { outcome: 'error', kind, status: response.status, message: body.error.message };
    }
    return { outcome: 'lost', kind, why: `HTTP ${response.status} without an error body: ${text.slice(0, 200)}` };
}

// One request of `kind`; never throws. `guardMs`: the hang guard. `onAudio`: called once, at the
// first audio chunk of a chat_audio_stream (while its payloads are moving between the stages).
// `tokenDelayMs`: the thinker's delay per token (the demo's `token_delay_ms`), to slow a stream.
export async function runRequest(origin, kind, random,
                                 { guardMs = 30_000, onAudio = null, tokenDelayMs = 0 } = {}) {
    const input = words(random, 3 + Math.floor(random() * 6));
    const expected = `You said: ${input}.`;
    const controller = new AbortController();
    const guard = setTimeout(() => controller.abort(new Error('hang guard')), guardMs);
    const post = (path, body) => fetch(`${origin}${path}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
        signal: controller.signal,
    });
    const messages = [{ role: 'user', content: input }];
    try {
        if (kind === 'chat') {
            const response = await post('/v1/chat/completions', { model: kModel, messages });
            if (!response.ok) return await errorOutcome(response, kind);
            const body = await response.json();
            const text = body.choices?.[0]?.message?.content;
            return text === expected ? { outcome: 'ok', kind }
                                     : { outcome: 'lost', kind, why: `wrong answer ${JSON.stringify(text)}` };
        }
        if (kind === 'speech') {
            const response = await post('/v1/audio/speech',
                                        { model: kModel, voice: 'alloy', input, response_format: 'pcm' });
            if (!response.ok) return await errorOutcome(response, kind);
            const bytes = Buffer.from(await response.arrayBuffer());
            return bytes.length > 0 && bytes.length % 2 === 0
                ? { outcome: 'ok', kind } : { outcome: 'lost', kind, why: `${bytes.length} bytes of PCM` };
        }
        // The streaming kinds.
        const audio = kind === 'chat_audio_stream';
        const response = await post('/v1/chat/completions', {
            model: kModel, messages, stream: true,
            ...(audio ? { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'pcm16' } } : {}),
            ...(kind === 'slow_reader' || tokenDelayMs > 0
                ? { stage_params: { thinker: { token_delay_ms: tokenDelayMs || 20 } } } : {}),
        });
        if (!response.ok) return await errorOutcome(response, kind);
        let text = '';
        let done = false;
        let failure = null;
        let events = 0;
        await readSse(response, (data) => {
            if (data === '[DONE]') {
                done = true;
                return true;
            }
            const event = JSON.parse(data);
            if (event.error) {
                failure = event.error.message ?? JSON.stringify(event.error);
                return true;
            }
            events += 1;
            const delta = event.choices?.[0]?.delta ?? {};
            if (onAudio !== null && delta.audio?.data) {
                onAudio();
                onAudio = null;
            }
            text += delta.content ?? delta.audio?.transcript ?? '';
            return !(kind === 'disconnect' && events >= 1);
        }, { pauseMs: kind === 'slow_reader' ? 150 : 0 });
        if (kind === 'disconnect') return { outcome: 'aborted', kind };
        if (failure !== null) return { outcome: 'error', kind, message: failure };
        if (!done) return { outcome: 'lost', kind, why: 'the stream ended without [DONE] or an error' };
        return text === expected ? { outcome: 'ok', kind }
                                 : { outcome: 'lost', kind, why: `wrong answer ${JSON.stringify(text)}` };
    } catch (error) {
        const why = controller.signal.aborted ? `no answer within ${guardMs} ms`
                                              : `${error.name}: ${error.message}${error.cause ? ` (${error.cause.code ?? error.cause.message})` : ''}`;
        return { outcome: 'lost', kind, why };
    } finally {
        clearTimeout(guard);
    }
}

// A seeded generator (mulberry32): the same seed gives the same kinds and faults.
export function seededRandom(seed) {
    let state = seed >>> 0;
    return () => {
        state = (state + 0x6d2b79f5) >>> 0;
        let t = state;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
