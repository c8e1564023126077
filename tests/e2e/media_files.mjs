// Media files made in memory for the black-box tests (no dependencies: the browser tests in
// tests/browser/ import this too).

// A mono PCM16 WAV of a short sine (for input_audio parts).
export function makeWav({ sampleRate = 16_000, seconds = 0.1, hz = 440 } = {}) {
    const count = Math.round(sampleRate * seconds);
    const buf = Buffer.alloc(44 + 2 * count);
    buf.write('RIFF', 0, 'latin1');
    buf.writeUInt32LE(36 + 2 * count, 4);
    buf.write('WAVEfmt ', 8, 'latin1');
    buf.writeUInt32LE(16, 16);
    buf.writeUInt16LE(1, 20);
    buf.writeUInt16LE(1, 22);
    buf.writeUInt32LE(sampleRate, 24);
    buf.writeUInt32LE(2 * sampleRate, 28);
    buf.writeUInt16LE(2, 32);
    buf.writeUInt16LE(16, 34);
    buf.write('data', 36, 'latin1');
    buf.writeUInt32LE(2 * count, 40);
    for (let i = 0; i < count; ++i) {
        buf.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / sampleRate)), 44 + 2 * i);
    }
    return buf;
}

// An uncompressed 24-bit BMP of seeded pixels.
export function makeBmp(width, height, seed) {
    const stride = Math.ceil((width * 3) / 4) * 4;
    const out = Buffer.alloc(54 + stride * height);
    out.write('BM', 0);
    out.writeUInt32LE(out.length, 2);
    out.writeUInt32LE(54, 10);
    out.writeUInt32LE(40, 14);
    out.writeInt32LE(width, 18);
    out.writeInt32LE(height, 22);
    out.writeUInt16LE(1, 26);
    out.writeUInt16LE(24, 28);
    out.writeUInt32LE(stride * height, 34);
    let state = seed >>> 0;
    for (let i = 54; i < out.length; ++i) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        out[i] = state >>> 24;
    }
    return out;
}
