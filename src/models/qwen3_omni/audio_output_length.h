#pragma once
// How many audio-encoder tokens (thinker positions) `mel_frames` log-mel frames become in
// Qwen3-Omni's audio encoder (AuT). No libtorch: the processor, the prompt builder and M-RoPE use
// it as well as the encoder.
//
// The encoder cuts the frames into chunks of 2 * n_window (100) frames and runs three stride-2
// convolutions over each chunk, so a chunk of r frames gives ceil(ceil(ceil(r / 2) / 2) / 2)
// tokens (13 for a full chunk):
//   out(L) = 13 * (L / 100) + c(L % 100),  c(0) = 0.
// transformers' _get_feat_extract_output_lengths hard-codes 100 and 13; n_window generalizes
// both the same way the encoder's chunking does (n_window = 50 gives transformers' numbers).
//
// Thread safety: pure functions.
#include <cstdint>

namespace omnirt::models::qwen3_omni {

// Tokens of one chunk of `frames` frames (0 for 0 frames): three stride-2 halvings, rounded up.
[[nodiscard]] constexpr std::int64_t audio_chunk_output_length(std::int64_t frames) {
    if (frames <= 0) return 0;
    std::int64_t length = frames;
    for (int conv = 0; conv < 3; ++conv) length = (length + 1) / 2;
    return length;
}

// Encoder tokens of an audio of `mel_frames` frames (0 for none).
[[nodiscard]] constexpr std::int64_t audio_output_length(std::int64_t mel_frames,
                                                         std::int64_t n_window = 50) {
    if (mel_frames <= 0 || n_window <= 0) return 0;
    const std::int64_t chunk = 2 * n_window;
    return audio_chunk_output_length(chunk) * (mel_frames / chunk) +
           audio_chunk_output_length(mel_frames % chunk);
}

}  // namespace omnirt::models::qwen3_omni
