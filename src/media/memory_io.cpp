// libsndfile virtual IO over memory, and the PCM16 / WAV helpers shared by the encoders.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "media/internal.h"

namespace omnirt::media::detail {

std::int16_t to_pcm16(float sample) {
    if (std::isnan(sample)) return 0;
    const float clamped = std::clamp(sample, -1.0f, 1.0f);
    return static_cast<std::int16_t>(std::lrint(clamped * 32767.0f));
}

void append_s16le(std::span<const float> samples, std::string& out) {
    const std::size_t start = out.size();
    out.resize(start + samples.size() * 2);
    char* cursor = out.data() + start;
    for (float sample : samples) {
        const auto value = static_cast<std::uint16_t>(to_pcm16(sample));
        *cursor++ = static_cast<char>(value & 0xFF);
        *cursor++ = static_cast<char>(value >> 8);
    }
}

namespace {

void put_u32(std::string& out, std::uint32_t value) {
    for (int shift = 0; shift < 32; shift += 8)
        out.push_back(static_cast<char>((value >> shift) & 0xFF));
}
void put_u16(std::string& out, std::uint16_t value) {
    out.push_back(static_cast<char>(value & 0xFF));
    out.push_back(static_cast<char>(value >> 8));
}

template <class File>
sf_count_t length_of(const File& file) {
    return static_cast<sf_count_t>(file.data.size());
}

template <class File>
sf_count_t seek_in(sf_count_t offset, int whence, void* user) {
    auto& file = *static_cast<File*>(user);
    sf_count_t base = 0;
    switch (whence) {
        case SEEK_SET:
            base = 0;
            break;
        case SEEK_CUR:
            base = file.position;
            break;
        case SEEK_END:
            base = length_of(file);
            break;
        default:
            return -1;
    }
    const sf_count_t target = base + offset;
    if (target < 0) return -1;
    file.position = target;
    return target;
}

template <class File>
sf_count_t read_from(void* destination, sf_count_t count, void* user) {
    auto& file = *static_cast<File*>(user);
    const sf_count_t length = length_of(file);
    if (count <= 0 || file.position >= length) return 0;
    const sf_count_t n = std::min(count, length - file.position);
    std::memcpy(destination, reinterpret_cast<const char*>(file.data.data()) + file.position,
                static_cast<std::size_t>(n));
    file.position += n;
    return n;
}

template <class File>
sf_count_t tell_in(void* user) {
    return static_cast<File*>(user)->position;
}

sf_count_t memory_file_length(void* user) { return length_of(*static_cast<MemoryFile*>(user)); }
sf_count_t memory_view_length(void* user) { return length_of(*static_cast<MemoryView*>(user)); }

sf_count_t memory_file_write(const void* source, sf_count_t count, void* user) {
    auto& file = *static_cast<MemoryFile*>(user);
    if (count <= 0) return 0;
    const auto end = static_cast<std::size_t>(file.position + count);
    if (end > file.data.size()) file.data.resize(end);  // a seek past the end leaves zeros
    std::memcpy(file.data.data() + file.position, source, static_cast<std::size_t>(count));
    file.position += count;
    return count;
}

sf_count_t memory_view_write(const void*, sf_count_t, void*) { return 0; }

}  // namespace

std::string wav_header(int sample_rate, int channels, std::uint32_t data_bytes) {
    const bool streaming = data_bytes == 0xFFFFFFFFu;
    const std::uint32_t riff_size =
        streaming || data_bytes > 0xFFFFFFFFu - 36 ? 0xFFFFFFFFu : 36 + data_bytes;
    std::string out;
    out.reserve(44);
    out += "RIFF";
    put_u32(out, riff_size);
    out += "WAVEfmt ";
    put_u32(out, 16);  // fmt chunk size
    put_u16(out, 1);   // PCM
    put_u16(out, static_cast<std::uint16_t>(channels));
    put_u32(out, static_cast<std::uint32_t>(sample_rate));
    put_u32(out,
            static_cast<std::uint32_t>(sample_rate) * static_cast<std::uint32_t>(channels) * 2);
    put_u16(out, static_cast<std::uint16_t>(channels * 2));  // block align
    put_u16(out, 16);                                        // bits per sample
    out += "data";
    put_u32(out, data_bytes);
    return out;
}

SF_VIRTUAL_IO memory_file_io() {
    return SF_VIRTUAL_IO{
        .get_filelen = memory_file_length,
        .seek = seek_in<MemoryFile>,
        .read = read_from<MemoryFile>,
        .write = memory_file_write,
        .tell = tell_in<MemoryFile>,
    };
}

SF_VIRTUAL_IO memory_view_io() {
    return SF_VIRTUAL_IO{
        .get_filelen = memory_view_length,
        .seek = seek_in<MemoryView>,
        .read = read_from<MemoryView>,
        .write = memory_view_write,
        .tell = tell_in<MemoryView>,
    };
}

}  // namespace omnirt::media::detail
