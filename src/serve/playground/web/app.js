// The playground page: settings, the chat (streamed over SSE, history kept here), attachments,
// spoken replies and the live voice session. Everything that happens is mirrored into
// window.omnirtPlayground for the browser tests (tests/browser/) and for curious users.

import { Api, base64ToBytes } from './api.js';
import { formatBytes, makeAttachment, previewElement } from './attachments.js';
import { MessageList } from './messages.js';
import { PcmPlayer } from './pcm_player.js';
import { RealtimeSession } from './realtime.js';

const $ = (id) => document.getElementById(id);

// The test hooks. `turns`: one record per chat or voice turn (see newTurn); `events`: realtime
// events as {direction: 'in'|'out', type, at, event}; `errors`: messages shown to the user.
const hooks = {
    ready: false,
    state: { status: 'loading', model: '', voices: [], busy: false, realtime: 'off', conversation: [] },
    stats: { audioFramesPlayed: 0, audioChunksSent: 0, turns: [] },
    events: [],
    errors: [],
};
window.omnirtPlayground = hooks;

const api = new Api(() => $('api-key').value.trim());
const player = new PcmPlayer({ onPlayed: (frames) => (hooks.stats.audioFramesPlayed += frames) });
const messages = new MessageList($('messages'), $('empty'));
let attachments = [];
let chatAbort = null;
let session = null;

function setStatus(text, state = text) {
    hooks.state.status = text;
    const pill = $('status');
    pill.textContent = text;
    pill.dataset.state = state;
}

function showError(message) {
    hooks.errors.push(message);
    setStatus(message.length > 60 ? `${message.slice(0, 57)}…` : message, 'error');
    $('status').title = message;
}

function newTurn(kind) {
    const turn = {
        kind, startedAt: performance.now(), ttftMs: null, ttfaMs: null, text: '', textDeltas: 0,
        chunks: 0, audioChunks: 0, audioBytes: 0, wantsAudio: kind === 'voice', usage: null,
        finishReason: null, error: null, done: false, totalMs: null,
    };
    hooks.stats.turns.push(turn);
    return turn;
}

// --- server info -----------------------------------------------------------------------------

async function loadServerInfo() {
    try {
        const models = await api.getJson('/v1/models');
        hooks.state.model = models.data?.[0]?.id ?? '';
        $('model').textContent = hooks.state.model || 'no model';
    } catch (error) {
        $('model').textContent = 'model unknown';
        showError(error.status === 401 ? 'enter the API key (Settings)' : error.message);
        return false;
    }
    try {
        // Saved reference voices (kind "saved") are for /v1/audio/speech only, not chat audio.
        const voices = (await api.getJson('/v1/audio/voices')).voices
            .filter((voice) => voice.kind !== 'saved');
        hooks.state.voices = voices.map((voice) => voice.id);
        const select = $('voice');
        select.replaceChildren(new Option('model default', ''));
        for (const voice of voices) select.append(new Option(voice.name ?? voice.id, voice.id));
    } catch {
        hooks.state.voices = [];  // an older server: the model's default voice only
    }
    setStatus('ready');
    return true;
}

// --- chat ------------------------------------------------------------------------------------

function numberField(id) {
    const value = $(id).value.trim();
    return value === '' ? undefined : Number(value);
}

function chatBody(speak) {
    const body = {
        model: hooks.state.model,
        messages: hooks.state.conversation,
        max_tokens: numberField('max-tokens'),
        temperature: numberField('temperature'),
        seed: numberField('seed'),
        stream_options: { include_usage: true },
    };
    if (speak) {
        body.modalities = ['text', 'audio'];
        body.audio = { format: 'pcm16' };
        if ($('voice').value) body.audio.voice = $('voice').value;
        const frames = numberField('max-frames');
        if (frames) body.stage_sampling = { talker: { max_tokens: frames } };
    }
    return body;
}

async function sendChat() {
    const text = $('prompt').value.trim();
    if (hooks.state.busy || (text === '' && attachments.length === 0)) return;
    if (!hooks.state.model && !(await loadServerInfo())) return;
    const parts = attachments.map((attachment) => attachment.part);
    if (text) parts.push({ type: 'text', text });
    const userMessage = { role: 'user', content: attachments.length === 0 ? text : parts };
    hooks.state.conversation.push(userMessage);
    messages.addUser({ text, attachments });
    $('prompt').value = '';
    autosize();
    attachments = [];
    renderAttachments();

    const speak = $('speak').checked;
    if (speak) player.unlock();
    const turn = newTurn('chat');
    turn.wantsAudio = speak;
    const bubble = messages.addAssistant();
    setBusy(true);
    chatAbort = new AbortController();
    try {
        for await (const chunk of api.streamChat(chatBody(speak), chatAbort.signal)) {
            turn.chunks += 1;
            if (chunk.usage) turn.usage = chunk.usage;
            const choice = chunk.choices?.[0];
            if (!choice) continue;
            const delta = choice.delta ?? {};
            const now = performance.now() - turn.startedAt;
            if (typeof delta.content === 'string' && delta.content !== '') {
                turn.ttftMs ??= now;
                turn.textDeltas += 1;
                turn.text += delta.content;
                bubble.setText(turn.text);
            }
            if (delta.audio?.data) {
                const bytes = base64ToBytes(delta.audio.data);
                if (bytes.length > 0) {
                    turn.ttfaMs ??= now;
                    turn.audioChunks += 1;
                    turn.audioBytes += bytes.length;
                    player.push(delta.audio.id ?? 'chat', bytes);
                }
            }
            if (choice.finish_reason) turn.finishReason = choice.finish_reason;
            bubble.setFigures(turn);
        }
        hooks.state.conversation.push({ role: 'assistant', content: turn.text });
        if (turn.text === '') bubble.setText(turn.audioBytes > 0 ? '(speech only)' : '(no text)');
        setStatus('ready');
    } catch (error) {
        const stopped = chatAbort.signal.aborted;
        if (stopped && turn.text !== '') {
            // What was said before Stop stays in the conversation, as it stays on screen.
            hooks.state.conversation.push({ role: 'assistant', content: turn.text });
        } else {
            hooks.state.conversation.pop();  // the user message went unanswered: not resent
        }
        turn.error = stopped ? 'stopped' : error.message;
        bubble.setError(turn.error);
        if (stopped) setStatus('ready');
        else showError(error.message);
    } finally {
        turn.done = true;
        turn.totalMs = performance.now() - turn.startedAt;
        bubble.setFigures(turn);
        chatAbort = null;
        setBusy(false);
    }
}

function setBusy(busy) {
    hooks.state.busy = busy;
    $('send').textContent = busy ? 'Stop' : 'Send';
    $('send').classList.toggle('stop', busy);
    if (busy) setStatus('generating', 'busy');
}

// --- attachments -----------------------------------------------------------------------------

async function addFiles(files) {
    for (const file of files) {
        try {
            attachments.push(await makeAttachment(file));
        } catch (error) {
            showError(error.message);
        }
    }
    renderAttachments();
}

function renderAttachments() {
    const list = $('attachments');
    list.replaceChildren(...attachments.map((attachment, index) => {
        const item = document.createElement('li');
        item.className = `attachment ${attachment.kind}`;
        item.append(previewElement(attachment));
        const label = document.createElement('span');
        label.textContent = `${attachment.name} · ${formatBytes(attachment.size)}`;
        const remove = document.createElement('button');
        remove.type = 'button';
        remove.className = 'remove';
        remove.title = `Remove ${attachment.name}`;
        remove.textContent = '×';
        remove.onclick = () => {
            URL.revokeObjectURL(attachment.previewUrl);
            attachments.splice(index, 1);
            renderAttachments();
        };
        item.append(label, remove);
        return item;
    }));
    list.hidden = attachments.length === 0;
}

// --- voice session ---------------------------------------------------------------------------

function logEvent(direction, event) {
    if (event.type === 'input_audio_buffer.append') {
        hooks.stats.audioChunksSent += 1;
        return;
    }
    hooks.events.push({ direction, type: event.type, at: performance.now(), event });
    $('event-count').textContent = String(hooks.events.length);
    const line = document.createElement('li');
    line.className = direction;
    line.textContent = `${direction === 'in' ? '←' : '→'} ${event.type}`;
    line.title = JSON.stringify(event).slice(0, 2000);
    const log = $('event-log');
    log.append(line);
    while (log.childElementCount > 200) log.firstElementChild.remove();
}

// The realtime session's turns: their bubbles (kept out of the hooks' plain data) and records.
const voiceBubbles = new WeakMap();  // turn -> {user, assistant}

function onVoiceTurnStart() {
    const turn = newTurn('voice');
    voiceBubbles.set(turn, { user: messages.addUser({ voice: true }), assistant: null });
    return turn;
}

function onVoiceTurn(turn, what, event) {
    const now = performance.now();
    const bubbles = voiceBubbles.get(turn);
    const assistant = () => (bubbles.assistant ??= messages.addAssistant());
    const since = () => now - (turn.speechStoppedAt ?? turn.startedAt);
    switch (what) {
        case 'speech_stopped':
            turn.speechStoppedAt = now;
            bubbles.user.setText('Voice message');
            break;
        case 'user_transcript':
            if (event.transcript) bubbles.user.setText(event.transcript);
            break;
        case 'item':
            if (event.item?.role === 'assistant') turn.itemId = event.item.id;
            break;
        case 'response_created':
            turn.responseId = event.response?.id ?? '';
            assistant();
            break;
        case 'audio':
            turn.ttfaMs ??= since();
            turn.audioChunks += 1;
            turn.audioBytes += Math.floor(((event.delta ?? '').length * 3) / 4) -
                               ((event.delta ?? '').match(/=*$/)[0].length);
            turn.itemId = event.item_id;
            assistant().setFigures(turn);
            break;
        case 'text':
            turn.ttftMs ??= since();
            turn.textDeltas += 1;
            turn.text += event.delta ?? '';
            assistant().setText(turn.text);
            assistant().setFigures(turn);
            break;
        case 'done': {
            const usage = event.response?.usage;
            turn.done = true;
            turn.totalMs = since();
            turn.usage = usage ? { prompt_tokens: usage.input_tokens, completion_tokens: usage.output_tokens }
                               : null;
            if (turn.text === '') assistant().setText(turn.audioBytes > 0 ? '(speech only)' : '(no reply)');
            assistant().setFigures(turn);
            break;
        }
        default:
            break;
    }
}

function setRealtime(state) {
    hooks.state.realtime = state;
    const on = state !== 'off';
    $('mic').setAttribute('aria-pressed', String(on));
    $('mic').dataset.state = state;
    const words = {
        off: 'Microphone off.', connecting: 'Connecting…', listening: 'Listening: just talk.',
        thinking: 'Thinking…', speaking: 'Speaking: talk to interrupt.',
    };
    $('voice-state').textContent = words[state] ?? state;
    if (on) setStatus(state, 'voice');
    else if (hooks.state.status !== 'error') setStatus('ready');
}

async function toggleVoice() {
    if (session) {
        session.stop();
        session = null;
        return;
    }
    player.unlock();
    session = new RealtimeSession({
        voice: $('voice').value,
        maxOutputTokens: numberField('max-tokens'),
        maxFrames: numberField('max-frames'),
        apiKey: $('api-key').value.trim(),
        player,
        hooks: {
            onEvent: logEvent,
            onStatus: (state) => {
                setRealtime(state);
                if (state === 'off') session = null;
            },
            onError: (message) => showError(message),
            onTurnStart: onVoiceTurnStart,
            onTurn: onVoiceTurn,
        },
    });
    try {
        await session.start();
    } catch (error) {
        session?.stop();
        session = null;
        showError(error.message);
    }
}

// --- wiring ----------------------------------------------------------------------------------

function autosize() {
    const prompt = $('prompt');
    prompt.style.height = 'auto';
    prompt.style.height = `${Math.min(prompt.scrollHeight, 200)}px`;
}

$('composer').addEventListener('submit', (event) => {
    event.preventDefault();
    if (chatAbort) {
        chatAbort.abort();  // the server sees the disconnect and aborts the request
        player.stop();
    } else {
        sendChat();
    }
});
$('prompt').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        if (!hooks.state.busy) sendChat();
    }
});
$('prompt').addEventListener('input', autosize);
$('file').addEventListener('change', (event) => {
    addFiles([...event.target.files]).finally(() => (event.target.value = ''));
});
$('mic').addEventListener('click', toggleVoice);
$('settings').addEventListener('submit', (event) => event.preventDefault());
$('clear').addEventListener('click', () => {
    chatAbort?.abort();
    player.stop();
    hooks.state.conversation = [];
    messages.clear();
});
$('api-key').addEventListener('change', () => loadServerInfo());
$('speak').addEventListener('change', () => {
    if ($('speak').checked) player.unlock();
});

renderAttachments();
loadServerInfo().finally(() => {
    hooks.ready = true;
});
