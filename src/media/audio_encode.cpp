// Whole-buffer encoders: wav and pcm written directly, flac / opus / mp3 through libsndfile's
// virtual IO into memory, aac through FFmpeg (aac_encoder.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "media/aac_encoder.h"
#include "media/internal.h"

namespace omnirt::media {
namespace {

constexpr std::array<int, 5> kOpusRates = {8000, 12000, 16000, 24000, 48000};
constexpr std::array<int, 9> kMp3Rates = {8000,  11025, 12000, 16000, 22050,
                                          24000, 32000, 44100, 48000};

template <std::size_t N>
bool contains(const std::array<int, N>& rates, int rate) {
    return std::find(rates.begin(), rates.end(), rate) != rates.end();
}

// The rate a codec runs at for a buffer at `rate` (see encode_audio's contract).
int codec_rate(AudioFormat format, int rate) {
    if (format == AudioFormat::opus && !contains(kOpusRates, rate)) return 48000;
    if (format == AudioFormat::mp3 && !contains(kMp3Rates, rate)) return 48000;
    return rate;
}

Result<std::string> encode_with_libsndfile(const AudioBuffer& buffer, AudioFormat format) {
    int sf_format = 0;
    switch (format) {
        case AudioFormat::flac:
            sf_format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
            break;
        case AudioFormat::opus:
            sf_format = SF_FORMAT_OGG | SF_FORMAT_OPUS;
            break;
        case AudioFormat::mp3:
            sf_format = SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
            break;
        default:
            break;
    }
    detail::MemoryFile file;
    SF_VIRTUAL_IO io = detail::memory_file_io();
    SF_INFO info{};
    info.samplerate = buffer.sample_rate;
    info.channels = buffer.channels;
    info.format = sf_format;
    std::unique_ptr<SNDFILE, detail::SndfileCloser> handle(
        sf_open_virtual(&io, SFM_WRITE, &info, &file));
    if (!handle) {
        return fail(ErrorCode::internal, "cannot start the " + std::string(to_string(format)) +
                                             " encoder (" + std::to_string(buffer.sample_rate) +
                                             " Hz, " + std::to_string(buffer.channels) +
                                             " channels): " + sf_strerror(nullptr));
    }
    // Clamped floats (NaN as 0) rather than shorts: libsndfile 1.2.0's MP3 encoder garbles
    // stereo audio written with sf_writef_short.
    constexpr std::size_t kBlockFrames = 4096;
    const auto channels = static_cast<std::size_t>(buffer.channels);
    std::vector<float> block(kBlockFrames * channels);
    const std::size_t frames = buffer.samples.size() / channels;
    for (std::size_t start = 0; start < frames; start += kBlockFrames) {
        const std::size_t count = std::min(kBlockFrames, frames - start);
        for (std::size_t i = 0; i < count * channels; ++i) {
            const float sample = buffer.samples[start * channels + i];
            block[i] = std::isnan(sample) ? 0.0f : std::clamp(sample, -1.0f, 1.0f);
        }
        const sf_count_t written =
            sf_writef_float(handle.get(), block.data(), static_cast<sf_count_t>(count));
        if (written != static_cast<sf_count_t>(count)) {
            return fail(ErrorCode::internal, std::string(to_string(format)) +
                                                 " encoder failed: " + sf_strerror(handle.get()));
        }
    }
    if (sf_close(handle.release()) != 0) {
        return fail(ErrorCode::internal,
                    std::string(to_string(format)) + " encoder failed while finishing the file");
    }
    return std::move(file.data);
}

}  // namespace

Result<std::string> encode_audio(const AudioBuffer& buffer, AudioFormat format) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    switch (format) {
        case AudioFormat::pcm: {
            std::string out;
            detail::append_s16le(buffer.samples, out);
            return out;
        }
        case AudioFormat::wav: {
            const std::size_t data_bytes = buffer.samples.size() * 2;
            if (data_bytes > 0xFFFFFFFFu - 36 - 1) {
                return fail(ErrorCode::out_of_range,
                            "audio too long for a WAV file (4 GiB of data at most)");
            }
            std::string out = detail::wav_header(buffer.sample_rate, buffer.channels,
                                                 static_cast<std::uint32_t>(data_bytes));
            out.reserve(out.size() + data_bytes);
            detail::append_s16le(buffer.samples, out);
            return out;
        }
        case AudioFormat::aac: {
            OMNI_TRY(auto encoder, detail::AacEncoder::create(buffer.sample_rate, buffer.channels));
            OMNI_TRY(std::string out, encoder->push(buffer.samples));
            OMNI_TRY(std::string tail, encoder->finish());
            return out + tail;
        }
        case AudioFormat::flac:
        case AudioFormat::opus:
        case AudioFormat::mp3:
            break;
    }
    if (!format_available(format)) {
        return fail(ErrorCode::unimplemented,
                    "this build's libsndfile (" + std::string(sf_version_string()) +
                        ") cannot write " + std::string(to_string(format)) +
                        "; use wav, pcm or flac");
    }
    if (format == AudioFormat::mp3 && buffer.channels > 2) {
        return fail(ErrorCode::invalid_argument,
                    "mp3 holds 1 or 2 channels, got " + std::to_string(buffer.channels));
    }
    if (format == AudioFormat::opus && buffer.channels > 8) {
        return fail(ErrorCode::invalid_argument,
                    "opus holds 1 to 8 channels here, got " + std::to_string(buffer.channels));
    }
    const int rate = codec_rate(format, buffer.sample_rate);
    if (rate != buffer.sample_rate) {
        OMNI_TRY(AudioBuffer converted, resample(buffer, rate));
        return encode_with_libsndfile(converted, format);
    }
    return encode_with_libsndfile(buffer, format);
}

}  // namespace omnirt::media
