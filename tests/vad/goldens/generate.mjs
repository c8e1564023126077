// Writes the Silero VAD golden data that tests/vad/silero_vad_test.cpp compares omnirt's
// network against: a few 16 kHz pcm16 recordings (espeak-ng speech, white noise) and, for each
// test recording, the speech probability of every 512-sample window as computed by the npm
// package's own Silero class (64-sample context, [2,1,128] state) on its own silero_vad_v5.onnx,
// run by onnxruntime-web (WebAssembly, one thread).
//
//   cd tests/vad/goldens && npm ci && node generate.mjs
//
// Needs espeak-ng on PATH (Debian package espeak-ng). Output, next to this file: speech_a.wav,
// speech_b.wav, noise.wav and probabilities.json. Recordings are described as parts (a file or
// a stretch of digital silence) so that the combined one costs no bytes in the repository.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import * as ort from "onnxruntime-web";

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
const kRate = 16000;
const kWindow = 512;

// ---- WAV (16-bit PCM mono) ----
function readWav(path) {
  const bytes = readFileSync(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 12;
  let rate = 0;
  let channels = 0;
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString("ascii", offset, offset + 4);
    const size = view.getUint32(offset + 4, true);
    if (id === "fmt ") {
      channels = view.getUint16(offset + 10, true);
      rate = view.getUint32(offset + 12, true);
    } else if (id === "data") {
      // espeak-ng writes 0x7fffffff as the data size when writing to a pipe; clamp.
      const end = Math.min(bytes.length, offset + 8 + size);
      const samples = new Int16Array((end - offset - 8) >> 1);
      for (let i = 0; i < samples.length; ++i) samples[i] = view.getInt16(offset + 8 + 2 * i, true);
      if (channels !== 1) throw new Error(`${path}: expected mono`);
      return { rate, samples };
    }
    offset += 8 + size + (size & 1);
  }
  throw new Error(`${path}: no data chunk`);
}

function writeWav(path, samples, rate) {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => data.writeInt16LE(s, 2 * i));
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVEfmt ", 8, "ascii");
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36, "ascii");
  header.writeUInt32LE(data.length, 40);
  writeFileSync(path, Buffer.concat([header, data]));
}

// Band-limited resampling (Hann-windowed sinc, 32 zero crossings, cutoff at 90% of the lower
// Nyquist frequency), evaluated directly per output sample: a one-off, so clarity over speed.
function resample(samples, fromRate, toRate) {
  const scale = 0.9 * Math.min(1, toRate / fromRate);
  const halfWidth = 32 / scale;
  const count = Math.floor((samples.length * toRate) / fromRate);
  const out = new Int16Array(count);
  for (let n = 0; n < count; ++n) {
    const t = (n * fromRate) / toRate;
    let acc = 0;
    for (let k = Math.ceil(t - halfWidth); k <= Math.floor(t + halfWidth); ++k) {
      if (k < 0 || k >= samples.length) continue;
      const x = (t - k) * scale;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      const window = 0.5 + 0.5 * Math.cos((Math.PI * (t - k)) / halfWidth);
      acc += samples[k] * scale * sinc * window;
    }
    out[n] = Math.max(-32768, Math.min(32767, Math.round(acc)));
  }
  return out;
}

function speak(text, path) {
  const dir = mkdtempSync(join(tmpdir(), "omnirt-vad-"));
  try {
    const raw = join(dir, "speech.wav");
    execFileSync("espeak-ng", ["-v", "en-us", "-s", "160", "-w", raw, text]);
    const { rate, samples } = readWav(raw);
    writeWav(path, rate === kRate ? samples : resample(samples, rate, kRate), kRate);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// White noise, uniform in [-0.3, 0.3] of full scale, from a seeded generator (mulberry32).
function writeNoise(path, seconds, seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const samples = new Int16Array(seconds * kRate);
  for (let i = 0; i < samples.length; ++i) samples[i] = Math.round((next() * 2 - 1) * 0.3 * 32767);
  writeWav(path, samples, kRate);
}

// ---- generate ----
speak("Please book a table for two tonight.", join(here, "speech_a.wav"));
speak("Thank you that sounds perfect.", join(here, "speech_b.wav"));
writeNoise(join(here, "noise.wav"), 1, 12345);

const recordings = [
  { name: "speech", parts: [{ file: "speech_a.wav" }] },
  { name: "silence", parts: [{ silence_ms: 1000 }] },
  { name: "noise", parts: [{ file: "noise.wav" }] },
  {
    name: "speech_silence_speech",
    parts: [{ file: "speech_a.wav" }, { silence_ms: 1200 }, { file: "speech_b.wav" }],
  },
];

function assemble(parts) {
  const pieces = parts.map((part) =>
    part.file ? readWav(join(here, part.file)).samples : new Int16Array((part.silence_ms * kRate) / 1000),
  );
  const total = new Int16Array(pieces.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of pieces) {
    total.set(p, offset);
    offset += p.length;
  }
  return total;
}

const packageJson = require("@ricky0123/vad-web/package.json");
const modelPath = require.resolve("@ricky0123/vad-web/dist/silero_vad_v5.onnx");
const modelBytes = readFileSync(modelPath);
const { Silero } = require("@ricky0123/vad-web/dist/models/silero.js");
ort.env.wasm.numThreads = 1;
const silero = await Silero.new(ort, async () =>
  modelBytes.buffer.slice(modelBytes.byteOffset, modelBytes.byteOffset + modelBytes.byteLength),
);

for (const recording of recordings) {
  const samples = assemble(recording.parts);
  silero.reset_state();
  const probabilities = [];
  for (let start = 0; start + kWindow <= samples.length; start += kWindow) {
    const frame = new Float32Array(kWindow);
    for (let i = 0; i < kWindow; ++i) frame[i] = samples[start + i] / 32768;
    const { isSpeech } = await silero.process(frame);
    probabilities.push(Number(isSpeech.toFixed(6)));
  }
  recording.samples = samples.length;
  recording.probabilities = probabilities;
}

const golden = {
  generator: "tests/vad/goldens/generate.mjs",
  model: {
    package: `@ricky0123/vad-web@${packageJson.version}`,
    file: "dist/silero_vad_v5.onnx",
    sha256: createHash("sha256").update(modelBytes).digest("hex"),
  },
  runtime: `onnxruntime-web@${JSON.parse(readFileSync(join(here, "node_modules/onnxruntime-web/package.json"))).version} (wasm, 1 thread)`,
  sample_rate: kRate,
  window: kWindow,
  input_scale: "pcm16 / 32768",
  recordings,
};
writeFileSync(join(here, "probabilities.json"), JSON.stringify(golden, null, 1) + "\n");
for (const r of recordings) {
  console.log(r.name, r.samples, "samples,", r.probabilities.length, "windows, max p",
    Math.max(...r.probabilities).toFixed(3));
}
