#pragma once
// Private to omnirt_media: PCM16 quantisation, the WAV header and libsndfile virtual IO over
// memory. Not installed for other layers.
#include <sndfile.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "media/audio.h"

namespace omnirt::media::detail {

// Clamps to -1..1 (NaN -> 0) and quantises as lrint(x * 32767).
[[nodiscard]] std::int16_t to_pcm16(float sample);
// Appends the samples as s16le to `out`.
void append_s16le(std::span<const float> samples, std::string& out);
// The 44-byte canonical PCM16 WAV header; data_bytes == 0xFFFFFFFF writes the streaming form
// (RIFF size 0xFFFFFFFF too).
[[nodiscard]] std::string wav_header(int sample_rate, int channels, std::uint32_t data_bytes);

// A growable in-memory file for libsndfile's write path (seekable: codecs patch headers).
struct MemoryFile {
    std::string data;
    sf_count_t position = 0;
};
// Read-only view for the decode path.
struct MemoryView {
    std::span<const std::byte> data;
    sf_count_t position = 0;
};

[[nodiscard]] SF_VIRTUAL_IO memory_file_io();
[[nodiscard]] SF_VIRTUAL_IO memory_view_io();

// RAII for SNDFILE*.
struct SndfileCloser {
    void operator()(SNDFILE* file) const { sf_close(file); }
};

}  // namespace omnirt::media::detail
