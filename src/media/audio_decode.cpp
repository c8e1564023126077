// decode_audio: any libsndfile-readable container from memory, bounded by DecodeOptions.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "media/internal.h"

namespace omnirt::media {

Result<AudioBuffer> decode_audio(std::span<const std::byte> bytes, const DecodeOptions& options) {
    if (bytes.empty()) return fail(ErrorCode::invalid_argument, "audio data is empty");
    if (options.max_decoded_samples <= 0) {
        return fail(ErrorCode::invalid_argument, "max_decoded_samples must be positive");
    }
    detail::MemoryView view{.data = bytes, .position = 0};
    SF_VIRTUAL_IO io = detail::memory_view_io();
    SF_INFO info{};
    std::unique_ptr<SNDFILE, detail::SndfileCloser> handle(
        sf_open_virtual(&io, SFM_READ, &info, &view));
    if (!handle) {
        return fail(
            ErrorCode::invalid_argument,
            std::string("audio data is not a readable audio file: ") + sf_strerror(nullptr));
    }
    AudioBuffer out{.sample_rate = info.samplerate, .channels = info.channels, .samples = {}};
    if (Status valid = validate(out); !valid) {
        return fail(valid.error().with_context("decoded audio header"));
    }
    // Never trust info.frames for allocation: headers can lie. Reserve at most what the budget
    // allows and what the input could hold uncompressed (one byte per sample, as 8-bit PCM);
    // compressed streams grow the vector as they decode.
    const std::int64_t channels = info.channels;
    const std::int64_t max_frames = options.max_decoded_samples / channels;
    if (info.frames > 0) {
        const std::int64_t plausible_frames = static_cast<std::int64_t>(bytes.size()) / channels;
        const std::int64_t reserve_frames =
            std::min({static_cast<std::int64_t>(info.frames), max_frames, plausible_frames});
        out.samples.reserve(static_cast<std::size_t>(reserve_frames * channels));
    }
    constexpr sf_count_t kBlockFrames = 4096;
    std::vector<float> block(static_cast<std::size_t>(kBlockFrames * channels));
    std::int64_t total_frames = 0;
    for (;;) {
        const sf_count_t got = sf_readf_float(handle.get(), block.data(), kBlockFrames);
        if (got < 0) break;
        if (got == 0) {
            const int error = sf_error(handle.get());
            if (error != SF_ERR_NO_ERROR) {
                return fail(ErrorCode::data_loss,
                            std::string("audio data is corrupt: ") + sf_strerror(handle.get()));
            }
            break;
        }
        if (total_frames + got > max_frames) {
            return fail(ErrorCode::resource_exhausted,
                        "decoded audio exceeds the limit of " +
                            std::to_string(options.max_decoded_samples) + " samples");
        }
        total_frames += got;
        // Float files can carry NaN / inf; downstream stages get silence instead.
        for (sf_count_t i = 0; i < got * channels; ++i) {
            if (!std::isfinite(block[static_cast<std::size_t>(i)]))
                block[static_cast<std::size_t>(i)] = 0.0f;
        }
        out.samples.insert(out.samples.end(), block.begin(),
                           block.begin() + static_cast<std::ptrdiff_t>(got * channels));
    }
    // Finite values beyond -1..1 (lossy overshoot, float files) are kept as decoded.
    return out;
}

}  // namespace omnirt::media
