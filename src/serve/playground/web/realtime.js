// A live voice conversation over GET /v1/realtime (WebSocket, OpenAI Realtime GA events): the
// microphone goes up as input_audio_buffer.append (PCM16 mono 24 kHz, base64, ~40 ms each), the
// server's VAD finds the turns, the reply's audio is played as it arrives. Speech that starts
// while the reply is playing is a barge-in: playback stops and the server is told how much of
// the item was heard (conversation.item.truncate).

import { base64ToBytes, bytesToBase64 } from './api.js';

export const kRealtimeRate = 24000;
const kChunkMs = 40;

// `maxOutputTokens`: the session's cap per response (undefined: the server's).
// `hooks`: onEvent(direction, event) for every event in and out; onStatus(state): 'connecting',
// 'listening', 'thinking', 'speaking', 'off'; onError(message); onTurnStart() -> a new turn
// (opaque here); onTurn(turn, what, event) with what: 'speech_stopped', 'item',
// 'user_transcript', 'response_created', 'audio', 'text', 'done'.
// `player`: a PcmPlayer; `apiKey`: '' or the key (sent as a subprotocol, as OpenAI's browser
// clients do, since a browser WebSocket cannot set headers).
export class RealtimeSession {
    constructor({ voice, maxOutputTokens, maxFrames, apiKey, player, hooks }) {
        this.voice = voice;
        this.maxOutputTokens = maxOutputTokens;
        this.maxFrames = maxFrames;
        this.apiKey = apiKey;
        this.player = player;
        this.hooks = hooks;
        this.socket = null;
        this.mic = null;
        this.turn = null;                // the turn being spoken or answered
        this.turnsByResponse = new Map();  // response id -> its turn, until response.done
        // Responses in progress and assistant items heard when the user spoke again: their late
        // audio deltas (sent before the server saw the interruption) are dropped, not played.
        this.interruptedResponses = new Set();
        this.interruptedItems = new Set();
        this.audioItems = new Set();     // assistant items with audio since the last speech_started
        this.closed = false;
    }

    // Opens the socket and the microphone; resolves once both run.
    async start() {
        const url = new URL('/v1/realtime', location.href);
        url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
        const protocols = this.apiKey ? ['realtime', `openai-insecure-api-key.${this.apiKey}`] : [];
        this.hooks.onStatus('connecting');
        const socket = new WebSocket(url, protocols);
        this.socket = socket;
        await new Promise((resolve, reject) => {
            socket.onopen = resolve;
            socket.onerror = () => reject(new Error('the realtime WebSocket could not be opened ' +
                                                    '(does this server have /v1/realtime?)'));
        });
        socket.onerror = null;
        socket.onmessage = (message) => this.receive(message.data);
        socket.onclose = (event) => {
            if (!this.closed) this.hooks.onError(`realtime connection closed (${event.code})`);
            this.stop();
        };
        const output = { format: { type: 'audio/pcm', rate: kRealtimeRate } };
        if (this.voice) output.voice = this.voice;
        const session = { type: 'realtime', output_modalities: ['audio'] };
        if (this.maxOutputTokens) session.max_output_tokens = this.maxOutputTokens;
        // omnirt's extension, as in chat: caps the speech frames of each answer.
        if (this.maxFrames) session.stage_sampling = { talker: { max_tokens: this.maxFrames } };
        this.send({
            type: 'session.update',
            session: {
                ...session,
                audio: {
                    input: {
                        format: { type: 'audio/pcm', rate: kRealtimeRate },
                        turn_detection: { type: 'server_vad' },
                    },
                    output,
                },
            },
        });
        this.mic = await startMicrophone((samples) => this.sendAudio(samples));
        this.hooks.onStatus('listening');
    }

    stop() {
        if (this.closed) return;
        this.closed = true;
        this.mic?.stop();
        this.mic = null;
        if (this.socket && this.socket.readyState <= WebSocket.OPEN) this.socket.close(1000);
        this.player.stop();
        this.hooks.onStatus('off');
    }

    send(event) {
        if (this.socket?.readyState !== WebSocket.OPEN) return;
        this.socket.send(JSON.stringify(event));
        // Audio appends are too many to log one by one; their count is kept instead.
        this.hooks.onEvent('out', event.type === 'input_audio_buffer.append'
                                      ? { type: event.type } : event);
    }

    sendAudio(samples) {
        const bytes = new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
        this.send({ type: 'input_audio_buffer.append', audio: bytesToBase64(bytes) });
    }

    receive(text) {
        let event;
        try {
            event = JSON.parse(text);
        } catch {
            this.hooks.onError('the server sent a realtime event that is not JSON');
            return;
        }
        this.hooks.onEvent('in', summarize(event));
        switch (event.type) {
            case 'input_audio_buffer.speech_started':
                this.bargeIn();
                this.turn = this.hooks.onTurnStart();
                break;
            case 'input_audio_buffer.speech_stopped':
                this.hooks.onTurn(this.currentTurn(), 'speech_stopped', event);
                this.hooks.onStatus('thinking');
                break;
            case 'conversation.item.added':
            case 'conversation.item.done':
                if (this.turn) this.hooks.onTurn(this.turn, 'item', event);
                break;
            case 'conversation.item.input_audio_transcription.completed':
                if (this.turn) this.hooks.onTurn(this.turn, 'user_transcript', event);
                break;
            case 'response.created': {
                const turn = this.currentTurn();
                if (event.response?.id) this.turnsByResponse.set(event.response.id, turn);
                this.hooks.onTurn(turn, 'response_created', event);
                break;
            }
            case 'response.output_audio.delta':
                if (this.interruptedResponses.has(event.response_id) ||
                    this.interruptedItems.has(event.item_id)) {
                    break;
                }
                this.audioItems.add(event.item_id);
                this.player.push(event.item_id, base64ToBytes(event.delta ?? ''));
                this.hooks.onTurn(this.turnOf(event.response_id), 'audio', event);
                this.hooks.onStatus('speaking');
                break;
            case 'response.output_audio_transcript.delta':
            case 'response.output_text.delta':
                this.hooks.onTurn(this.turnOf(event.response_id), 'text', event);
                break;
            case 'response.done': {
                const id = event.response?.id;
                const turn = this.turnsByResponse.get(id) ?? this.turn;
                this.turnsByResponse.delete(id);
                this.interruptedResponses.delete(id);
                if (turn) this.hooks.onTurn(turn, 'done', event);
                if (turn === this.turn) {
                    this.turn = null;
                    this.hooks.onStatus('listening');
                }
                break;
            }
            case 'error':
                this.hooks.onError(event.error?.message ?? 'realtime error');
                break;
            default:
                break;
        }
    }

    // The turn being spoken or answered; a reply without a speech_started first (a response the
    // server starts by itself) gets one.
    currentTurn() {
        this.turn ??= this.hooks.onTurnStart();
        return this.turn;
    }

    // The turn a response belongs to (the current one for a response not seen created).
    turnOf(responseId) {
        return this.turnsByResponse.get(responseId) ?? this.currentTurn();
    }

    // The user spoke over the reply: silence it, drop what is still on its way, and tell the
    // server what was heard.
    bargeIn() {
        for (const id of this.turnsByResponse.keys()) this.interruptedResponses.add(id);
        for (const id of this.audioItems) this.interruptedItems.add(id);
        this.audioItems.clear();
        const cut = this.player.stop();
        if (!cut || !cut.itemId) return;
        this.send({
            type: 'conversation.item.truncate',
            item_id: cut.itemId,
            content_index: 0,
            audio_end_ms: cut.playedMs,
        });
    }
}

// An event as logged: audio payloads replaced by their size.
function summarize(event) {
    if (typeof event.delta === 'string' && event.type === 'response.output_audio.delta') {
        return { ...event, delta: `<${Math.floor((event.delta.length * 3) / 4)} bytes>` };
    }
    return event;
}

// The microphone as PCM16 mono 24 kHz chunks of 40 ms, through an AudioWorklet.
async function startMicrophone(onChunk) {
    const stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    const context = new AudioContext();
    try {
        await context.audioWorklet.addModule(new URL('./mic_capture_worklet.js', import.meta.url));
        const source = context.createMediaStreamSource(stream);
        const node = new AudioWorkletNode(context, 'omnirt-mic-capture', {
            numberOfOutputs: 1,
            processorOptions: {
                targetRate: kRealtimeRate,
                chunkFrames: (kRealtimeRate * kChunkMs) / 1000,
            },
        });
        node.port.onmessage = (message) => onChunk(new Int16Array(message.data));
        source.connect(node);
        // The node outputs silence; connecting it keeps the graph pulling it.
        node.connect(context.destination);
        if (context.state === 'suspended') await context.resume();
    } catch (error) {
        stream.getTracks().forEach((track) => track.stop());
        context.close();
        throw error;
    }
    return {
        stop() {
            stream.getTracks().forEach((track) => track.stop());
            context.close();
        },
    };
}
