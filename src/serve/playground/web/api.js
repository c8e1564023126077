// HTTP calls to the omnirt server: JSON GETs and the chat SSE stream, with the API key the user
// typed (Authorization: Bearer KEY), and base64 helpers for media and PCM.

export class ApiError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}

export class Api {
    // `apiKey`: a function returning the key to send ('' sends none).
    constructor(apiKey) {
        this.apiKey = apiKey;
    }

    headers(extra = {}) {
        const headers = { ...extra };
        const key = this.apiKey();
        if (key) headers.Authorization = `Bearer ${key}`;
        return headers;
    }

    async getJson(path) {
        const response = await fetch(path, { headers: this.headers() });
        if (!response.ok) throw await errorOf(response);
        return response.json();
    }

    // POST /v1/chat/completions with stream: true; yields each chunk object until [DONE].
    async *streamChat(body, signal) {
        const response = await fetch('/v1/chat/completions', {
            method: 'POST',
            headers: this.headers({ 'Content-Type': 'application/json' }),
            body: JSON.stringify({ ...body, stream: true }),
            signal,
        });
        if (!response.ok) throw await errorOf(response);
        yield* sseEvents(response.body, signal);
    }
}

async function errorOf(response) {
    let message = `HTTP ${response.status}`;
    try {
        const body = await response.json();
        if (body?.error?.message) message = `${message}: ${body.error.message}`;
    } catch {
        // not JSON: the status says enough
    }
    return new ApiError(response.status, message);
}

// The JSON objects of an SSE body (`data: ...` events), up to `data: [DONE]`.
async function* sseEvents(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = '';
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done) return;
            pending += value;
            let end;
            while ((end = pending.search(/\r?\n\r?\n/)) >= 0) {
                const block = pending.slice(0, end);
                pending = pending.slice(end).replace(/^\r?\n\r?\n/, '');
                const data = block.split(/\r?\n/).filter((line) => line.startsWith('data:'))
                    .map((line) => line.slice(5).replace(/^ /, '')).join('\n');
                if (data === '') continue;
                if (data === '[DONE]') return;
                const event = JSON.parse(data);
                if (event.error) throw new ApiError(500, event.error.message ?? 'stream error');
                yield event;
            }
        }
    } finally {
        if (!signal?.aborted) reader.cancel().catch(() => {});
    }
}

export function bytesToBase64(bytes) {
    let binary = '';
    const step = 0x8000;
    for (let i = 0; i < bytes.length; i += step) {
        binary += String.fromCharCode.apply(null, bytes.subarray(i, i + step));
    }
    return btoa(binary);
}

export function base64ToBytes(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; ++i) bytes[i] = binary.charCodeAt(i);
    return bytes;
}
