// The fake microphone's input: a spoken sentence (espeak-ng) between 1 s and 3 s of silence, as
// PCM16 mono 24 kHz (sox). Chromium plays it in a loop (--use-file-for-fake-audio-capture).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

function hasTool(name) {
    try {
        execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
        return true;
    } catch {
        return false;
    }
}

// Writes the WAV into `dir`; returns its path.
export function makeSpeechWav(dir) {
    for (const tool of ['espeak-ng', 'sox']) {
        assert.ok(hasTool(tool), `${tool} makes the microphone input: install it (scripts/setup.sh)`);
    }
    const spoken = path.join(dir, 'spoken.wav');
    const mic = path.join(dir, 'mic.wav');
    execFileSync('espeak-ng', ['-v', 'en-us', '-s', '150', '-w', spoken,
                               'Hello there. What is the weather like today?']);
    execFileSync('sox', [spoken, '-r', '24000', '-c', '1', '-b', '16', mic, 'pad', '1', '3']);
    return mic;
}
