// The server's /health as the chaos scripts read it (docs/serve.md).
import { setTimeout as delay } from 'node:timers/promises';

// {status, body}: the HTTP status and the JSON body; status 0 with body.error when unreachable.
export async function health(origin) {
    try {
        const response = await fetch(`${origin}/health`, { signal: AbortSignal.timeout(5_000) });
        return { status: response.status, body: await response.json() };
    } catch (error) {
        return { status: 0, body: { error: error.message } };
    }
}

// Polls until /health says "ok" (200) or `timeoutMs` passed: {ok, last}.
export async function waitHealthy(origin, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
        last = await health(origin);
        if (last.status === 200 && last.body.status === 'ok') return { ok: true, last };
        await delay(200);  // polling a state, not synchronising with an event
    }
    return { ok: false, last };
}
