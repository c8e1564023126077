#pragma once
// The Whisper log-mel front end of Qwen3-Omni's audio encoder (WhisperFeatureExtractor with
// feature_size 128): 16 kHz mono float PCM -> [128, T] log-mel features, T = samples / 160.
// Pure functions over memory; no threads of their own; safe to call concurrently. CPU work
// (about 1 ms per 10 s of audio): run it on a worker, not on an IO loop thread.
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "media/audio.h"

namespace omnirt::media {

inline constexpr int kWhisperSampleRate = 16000;
inline constexpr int kWhisperFftSize = 400;    // periodic Hann window of the same length
inline constexpr int kWhisperHopLength = 160;  // 10 ms, 100 frames per second
inline constexpr int kWhisperMelBins = 128;

struct LogMelOptions {
    // Longest input accepted, in samples at 16 kHz (default 20 minutes); longer is out_of_range.
    std::int64_t max_samples = std::int64_t{kWhisperSampleRate} * 60 * 20;
};

// Row-major [mel_bins, frames]: values[bin * frames + frame].
struct LogMelSpectrogram {
    int mel_bins = kWhisperMelBins;
    std::int64_t frames = 0;
    std::vector<float> values;
};

// Features exactly as WhisperFeatureExtractor computes them for one unpadded utterance:
// reflect-padded (n_fft/2 each side) centered STFT, periodic Hann 400, hop 160, power spectrum,
// 128 Slaney mel filters over 0..8000 Hz (201 bins), the last STFT frame dropped (frames =
// samples / 160), log10(max(mel, 1e-10)), floored at (utterance max - 8), then (x + 4) / 4.
// Errors (invalid_argument): fewer than 160 samples (no frame), a NaN or infinite sample (its
// index named); out_of_range past options.max_samples.
[[nodiscard]] Result<LogMelSpectrogram> whisper_log_mel(std::span<const float> samples_16k_mono,
                                                        const LogMelOptions& options = {});

// The input the front end wants: channels averaged to mono (as librosa's mono load), then
// resampled to 16 kHz (libsoxr HQ) when the buffer has another rate.
[[nodiscard]] Result<std::vector<float>> to_whisper_input(const AudioBuffer& buffer);

// The 128 x 201 Slaney mel filter bank, row-major (filter-major), as transformers'
// mel_filter_bank(201, 128, 0, 8000, 16000, norm="slaney", mel_scale="slaney") builds it.
[[nodiscard]] const std::vector<double>& whisper_mel_filters();

}  // namespace omnirt::media
