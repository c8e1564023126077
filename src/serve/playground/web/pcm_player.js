// Plays streamed PCM16 mono (little-endian) through Web Audio as it arrives: each chunk becomes an
// AudioBuffer scheduled right after the previous one, so the speech is gapless while the server
// keeps ahead. Knows how much of each item was actually heard (for a barge-in's truncate) and
// counts the frames played.

const kLeadSeconds = 0.06;  // scheduling margin for the first chunk after silence

export class PcmPlayer {
    // onPlayed(frames): called when a chunk finished playing (or was cut at a barge-in).
    constructor({ sampleRate = 24000, onPlayed = () => {} } = {}) {
        this.sampleRate = sampleRate;
        this.onPlayed = onPlayed;
        this.context = null;
        this.nextTime = 0;
        this.segments = [];    // {source, itemId, start, frames, settled}
        this.carry = new Map();  // itemId -> a trailing odd byte
        this.heardMs = new Map();  // itemId -> ms heard in segments already finished or cut
    }

    // Creates (or resumes) the AudioContext; call from a user gesture so autoplay rules allow it.
    unlock() {
        if (!this.context) this.context = new AudioContext({ sampleRate: this.sampleRate });
        if (this.context.state === 'suspended') this.context.resume().catch(() => {});
        return this.context;
    }

    // Queues `bytes` (Uint8Array of s16le) of `itemId` behind what is already queued.
    push(itemId, bytes) {
        const context = this.unlock();
        const odd = this.carry.get(itemId);
        if (odd !== undefined) {
            const joined = new Uint8Array(bytes.length + 1);
            joined[0] = odd;
            joined.set(bytes, 1);
            bytes = joined;
            this.carry.delete(itemId);
        }
        if (bytes.length % 2 === 1) {
            this.carry.set(itemId, bytes[bytes.length - 1]);
            bytes = bytes.subarray(0, bytes.length - 1);
        }
        const frames = bytes.length / 2;
        if (frames === 0) return;
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
        const buffer = context.createBuffer(1, frames, this.sampleRate);
        const channel = buffer.getChannelData(0);
        for (let i = 0; i < frames; ++i) channel[i] = view.getInt16(2 * i, true) / 32768;

        const source = context.createBufferSource();
        source.buffer = buffer;
        source.connect(context.destination);
        const start = Math.max(this.nextTime, context.currentTime + kLeadSeconds);
        const segment = { source, itemId, start, frames, settled: false };
        source.onended = () => this.settle(segment, frames);
        source.start(start);
        this.nextTime = start + frames / this.sampleRate;
        this.segments.push(segment);
    }

    // The item whose audio is heard now or queued next ('' when silent).
    get currentItem() {
        return this.segments[0]?.itemId ?? '';
    }

    // Milliseconds of `itemId` heard so far (finished chunks plus the part of the one playing).
    playedMs(itemId) {
        let ms = this.heardMs.get(itemId) ?? 0;
        const now = this.context?.currentTime ?? 0;
        for (const segment of this.segments) {
            if (segment.itemId !== itemId) continue;
            const heard = Math.min(Math.max(now - segment.start, 0), segment.frames / this.sampleRate);
            ms += heard * 1000;
        }
        return Math.round(ms);
    }

    // Barge-in: silences everything queued. Returns {itemId, playedMs} of the item that was
    // being heard, or null when nothing was playing.
    stop() {
        if (this.segments.length === 0) return null;
        const itemId = this.currentItem;
        const playedMs = this.playedMs(itemId);
        const now = this.context.currentTime;
        for (const segment of [...this.segments]) {
            const heard = Math.min(Math.max(now - segment.start, 0), segment.frames / this.sampleRate);
            segment.source.onended = null;
            try {
                segment.source.stop();
            } catch {
                // never started
            }
            this.settle(segment, Math.round(heard * this.sampleRate));
        }
        this.nextTime = 0;
        this.carry.clear();
        return { itemId, playedMs };
    }

    settle(segment, frames) {
        if (segment.settled) return;
        segment.settled = true;
        this.heardMs.set(segment.itemId,
                         (this.heardMs.get(segment.itemId) ?? 0) + (frames / this.sampleRate) * 1000);
        this.segments = this.segments.filter((s) => s !== segment);
        if (frames > 0) this.onPlayed(frames);
    }
}
