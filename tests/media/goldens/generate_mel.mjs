// Writes mel_golden.bin: Whisper log-mel features (feature_size 128, as Qwen3-Omni's
// preprocessor_config.json sets it) computed by transformers.js' WhisperFeatureExtractor, an
// implementation independent of omnirt's, for a few deterministic 16 kHz signals.
//
// Run: cd tests/media/goldens && npm ci --no-audit --no-fund --ignore-scripts && node generate_mel.mjs
//
// File layout (little-endian): "OMNIMEL1", u32 case count, then per case: u32 name length,
// name bytes (UTF-8), u32 samples, u32 frames, f32 samples[samples], f32 features[128 * frames]
// (row-major [mel bin][frame]).
import { writeFileSync } from 'node:fs';
import { WhisperFeatureExtractor } from '@huggingface/transformers';

const extractor = new WhisperFeatureExtractor({
    feature_size: 128,
    sampling_rate: 16000,
    hop_length: 160,
    n_fft: 400,
    chunk_length: 300,
    n_samples: 4800000,
    nb_max_frames: 30000,
    padding_value: 0.0,
    return_attention_mask: true,
});

// xorshift32: the same sequence in any language.
function random(seed) {
    let state = seed >>> 0;
    return () => {
        state ^= state << 13; state >>>= 0;
        state ^= state >>> 17;
        state ^= state << 5; state >>>= 0;
        return state / 4294967296;
    };
}

function sweep(n) {
    // 50 Hz -> 7.5 kHz exponential sweep.
    const out = new Float32Array(n);
    const f0 = 50, f1 = 7500, duration = n / 16000;
    const k = Math.log(f1 / f0) / duration;
    for (let i = 0; i < n; ++i) {
        const t = i / 16000;
        out[i] = 0.6 * Math.sin((2 * Math.PI * f0 * (Math.exp(k * t) - 1)) / k);
    }
    return out;
}

function noise(n, seed) {
    const next = random(seed);
    const out = new Float32Array(n);
    for (let i = 0; i < n; ++i) out[i] = (next() * 2 - 1) * 0.3;
    return out;
}

function speech_like(n, seed) {
    // A 120 Hz glottal pulse train through two resonances, with a syllable envelope and noise.
    const next = random(seed);
    const out = new Float32Array(n);
    let y1 = 0, y2 = 0, z1 = 0, z2 = 0;
    const resonator = (f, r) => [2 * r * Math.cos((2 * Math.PI * f) / 16000), -r * r];
    const [a1, a2] = resonator(700, 0.97);
    const [b1, b2] = resonator(1800, 0.95);
    for (let i = 0; i < n; ++i) {
        const pulse = i % 133 === 0 ? 1 : 0;
        const excitation = pulse + (next() - 0.5) * 0.05;
        const y = excitation + a1 * y1 + a2 * y2;
        y2 = y1; y1 = y;
        const z = y + b1 * z1 + b2 * z2;
        z2 = z1; z1 = z;
        const envelope = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / 4000);
        out[i] = 0.02 * z * envelope;
    }
    return out;
}

function silence_then_tone(n) {
    const out = new Float32Array(n);
    for (let i = Math.floor(n / 2); i < n; ++i) out[i] = 0.25 * Math.sin((2 * Math.PI * 1000 * i) / 16000);
    return out;
}

const cases = [
    ['sine_sweep', sweep(12345)],
    ['white_noise', noise(8037, 12345)],
    ['speech_like', speech_like(9999, 777)],
    ['short', noise(1601, 99)],
    ['silence_then_tone', silence_then_tone(6559)],
];

const chunks = [Buffer.from('OMNIMEL1', 'ascii')];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
chunks.push(u32(cases.length));
for (const [name, samples] of cases) {
    const { input_features } = await extractor(samples, { max_length: samples.length });
    const [, bins, frames] = input_features.dims;
    if (bins !== 128 || frames !== Math.floor(samples.length / 160)) throw new Error(`${name}: dims ${input_features.dims}`);
    const features = Float32Array.from(input_features.data);
    chunks.push(u32(Buffer.byteLength(name)), Buffer.from(name), u32(samples.length), u32(frames));
    chunks.push(Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength));
    chunks.push(Buffer.from(features.buffer, features.byteOffset, features.byteLength));
    console.log(`${name}: ${samples.length} samples, ${frames} frames`);
}
writeFileSync(new URL('./mel_golden.bin', import.meta.url), Buffer.concat(chunks));
