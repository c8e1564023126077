// AudioWorklet processor: the microphone (any rate, any channel count) as PCM16 mono at
// `targetRate`, posted to the main thread in chunks of `chunkFrames` (an Int16Array's buffer,
// transferred). Linear interpolation resamples; the mic's own processing (echo cancellation,
// noise suppression) happens before this.

class MicCapture extends AudioWorkletProcessor {
    constructor(options) {
        super();
        const { targetRate = 24000, chunkFrames = 960 } = options.processorOptions ?? {};
        this.step = sampleRate / targetRate;  // input frames per output frame
        this.position = 0;  // of the next output frame, in input frames of the current block
        this.previous = 0;  // the last input frame of the previous block (position -1)
        this.chunkFrames = chunkFrames;
        this.chunk = new Int16Array(chunkFrames);
        this.filled = 0;
    }

    process(inputs) {
        const channels = inputs[0];
        if (!channels || channels.length === 0) return true;
        const frames = channels[0].length;
        const mono = new Float32Array(frames);
        for (const channel of channels) {
            for (let i = 0; i < frames; ++i) mono[i] += channel[i] / channels.length;
        }
        let position = this.position;
        while (position <= frames - 1) {
            const index = Math.floor(position);
            const fraction = position - index;
            const a = index < 0 ? this.previous : mono[index];
            const b = index + 1 < frames ? mono[index + 1] : a;
            this.emit(a + (b - a) * fraction);
            position += this.step;
        }
        this.position = position - frames;
        this.previous = mono[frames - 1];
        return true;
    }

    emit(value) {
        const clamped = Math.max(-1, Math.min(1, value));
        this.chunk[this.filled++] = clamped < 0 ? clamped * 0x8000 : clamped * 0x7fff;
        if (this.filled === this.chunkFrames) {
            // Transferring detaches the buffer (its length becomes 0): a fresh one follows.
            this.port.postMessage(this.chunk.buffer, [this.chunk.buffer]);
            this.chunk = new Int16Array(this.chunkFrames);
            this.filled = 0;
        }
    }
}

registerProcessor('omnirt-mic-capture', MicCapture);
