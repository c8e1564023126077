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

// The KV cache blocks requests hold, per stage with a KV cache (omnirt_stage_kv_blocks_used of
// /metrics, the prefix cache's not counted): {stage: blocks}. Empty for a pipeline without one
// (the demo pipeline's stages have none); null when /metrics is unreachable.
export async function kvBlocksInUse(origin) {
    try {
        const response = await fetch(`${origin}/metrics`, { signal: AbortSignal.timeout(5_000) });
        const blocks = {};
        for (const line of (await response.text()).split('\n')) {
            const match = /^omnirt_stage_kv_blocks_used\{stage="([^"]*)"\}\s+(\S+)$/.exec(line);
            if (match) blocks[match[1]] = Number(match[2]);
        }
        return blocks;
    } catch {
        return null;
    }
}

// Polls until no stage's requests hold a KV block (every request ended, so every block must be
// back) or `timeoutMs` passed: {ok, last}.
export async function waitKvFree(origin, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
        last = await kvBlocksInUse(origin);
        if (last && Object.values(last).every((blocks) => blocks === 0)) return { ok: true, last };
        await delay(200);  // heartbeats carry the counts: polling a state
    }
    return { ok: false, last };
}
