// The requests of the chaos and soak suites: against the demo pipeline (docs/demo_pipeline.md) by
// default, or against the model pipeline `omnirt serve` runs without arguments (Qwen3-Omni with
// speech on its generated tiny checkpoint: real AR engines with KV caches, modelTarget): chat
// completions with and without streaming, with audio (thinker and talker), speech, a client
// that disconnects mid-stream and one that reads slowly. Every request ends in one outcome:
//
//   ok        the full, correct answer ("You said: <input>." for the demo; for the model
//             pipeline the same text as the first complete answer to the same prompt, greedy,
//             and audio of the exact length the capped talker gives)
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

// The demo pipeline: it answers "You said: <input>." to any input.
export const demoTarget = {
    model: kModel,
    voice: 'alloy',
    prompt: (random) => words(random, 3 + Math.floor(random() * 6)),
    check: (prompt, text) => (text === `You said: ${prompt}.` ? null : `wrong answer ${JSON.stringify(text)}`),
    checkPcm: (bytes) => (bytes > 0 && bytes % 2 === 0 ? null : `${bytes} bytes of PCM`),
    request: {},
    tokenDelay: true,
    exactAudio: false,
    kinds: kKinds,
};

// Prompts of the model pipeline: a few, so that each is asked many times.
const kModelPrompts = ['hello there', 'what is the weather', 'tell me a story', 'count to five',
                       'a b c d', 'good morning'];
// The talker's frames per answer (stage_sampling.talker.max_tokens: random weights rarely say the
// codec's EOS) and the PCM16 bytes they decode to: the code2wav stage decodes a first chunk of
// 10 frames, then the rest, each call 1920 samples per frame minus 555
// (tests/e2e/qwen3_omni_speech.test.mjs, docs/models/qwen3_omni.md).
const kModelFrames = 12;
const kModelPcmBytes = 2 * (1920 * kModelFrames - 555 * 2);

// The model pipeline `model` (its id from /v1/models): greedy everywhere, so a prompt's answer
// is the same text alone, in any batch and after any restart; the first complete answer to a
// prompt is the one every later answer must equal.
export function modelTarget(model) {
    const answers = new Map();
    return {
        model,
        voice: 'ethan',
        prompt: (random) => kModelPrompts[Math.floor(random() * kModelPrompts.length)],
        // Answers with audio are kept apart from text-only ones (the prompt may differ by a
        // system turn).
        check: (prompt, text, audio) => {
            if (typeof text !== 'string') return `no text: ${JSON.stringify(text)}`;
            const key = `${audio ? 'audio' : 'text'}: ${prompt}`;
            const known = answers.get(key);
            if (known === undefined) {
                answers.set(key, text);
                return null;
            }
            return known === text ? null
                : `answer ${JSON.stringify(text)} differs from the first ${JSON.stringify(known)} to ${JSON.stringify(key)}`;
        },
        checkPcm: (bytes) => (bytes === kModelPcmBytes ? null : `${bytes} bytes of PCM, expected ${kModelPcmBytes}`),
        request: {
            temperature: 0, max_tokens: 6,
            stage_sampling: { talker: { temperature: 0, max_tokens: kModelFrames } },
        },
        tokenDelay: false,
        // A streamed answer's audio deltas add up to checkPcm's exact length.
        exactAudio: true,
        // Not speech: Qwen3-Omni does not read a text aloud (/v1/audio/speech is a 400 there).
        kinds: kKinds.filter((kind) => kind !== 'speech'),
    };
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
// `tokenDelayMs`: the thinker's delay per token (the demo's `token_delay_ms`, ignored for other
// targets), to slow a stream. `target`: demoTarget or a modelTarget.
export async function runRequest(origin, kind, random,
                                 { guardMs = 30_000, onAudio = null, tokenDelayMs = 0,
                                   target = demoTarget } = {}) {
    const input = target.prompt(random);
    const wrong = (text, audio = false) => {
        const why = target.check(input, text, audio);
        return why === null ? { outcome: 'ok', kind } : { outcome: 'lost', kind, why };
    };
    const controller = new AbortController();
    const guard = setTimeout(() => controller.abort(new Error('hang guard')), guardMs);
    const post = (path, body) => fetch(`${origin}${path}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
        signal: controller.signal,
    });
    const messages = [{ role: 'user', content: input }];
    try {
        if (kind === 'chat') {
            const response = await post('/v1/chat/completions',
                                        { model: target.model, messages, ...target.request });
            if (!response.ok) return await errorOutcome(response, kind);
            const body = await response.json();
            return wrong(body.choices?.[0]?.message?.content);
        }
        if (kind === 'speech') {
            const response = await post('/v1/audio/speech', {
                model: target.model, voice: target.voice, input, response_format: 'pcm',
                ...target.request,
            });
            if (!response.ok) return await errorOutcome(response, kind);
            const bytes = Buffer.from(await response.arrayBuffer());
            const why = target.checkPcm(bytes.length);
            return why === null ? { outcome: 'ok', kind } : { outcome: 'lost', kind, why };
        }
        // The streaming kinds.
        const audio = kind === 'chat_audio_stream';
        const response = await post('/v1/chat/completions', {
            model: target.model, messages, stream: true, ...target.request,
            ...(audio ? { modalities: ['text', 'audio'], audio: { voice: target.voice, format: 'pcm16' } } : {}),
            ...(target.tokenDelay && (kind === 'slow_reader' || tokenDelayMs > 0)
                ? { stage_params: { thinker: { token_delay_ms: tokenDelayMs || 20 } } } : {}),
        });
        if (!response.ok) return await errorOutcome(response, kind);
        let text = '';
        let done = false;
        let failure = null;
        let events = 0;
        let pcmBytes = 0;
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
            if (delta.audio?.data) {
                pcmBytes += Buffer.from(delta.audio.data, 'base64').length;
                if (onAudio !== null) {
                    onAudio();
                    onAudio = null;
                }
            }
            text += delta.content ?? delta.audio?.transcript ?? '';
            return !(kind === 'disconnect' && events >= 1);
        }, { pauseMs: kind === 'slow_reader' ? 150 : 0 });
        if (kind === 'disconnect') return { outcome: 'aborted', kind };
        if (failure !== null) return { outcome: 'error', kind, message: failure };
        if (!done) return { outcome: 'lost', kind, why: 'the stream ended without [DONE] or an error' };
        if (audio && target.exactAudio) {
            const why = target.checkPcm(pcmBytes);
            if (why !== null) return { outcome: 'lost', kind, why };
        }
        return wrong(text, audio);
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
