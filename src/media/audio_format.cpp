// Format names, content types and the runtime probe of libsndfile's writers (and FFmpeg's AAC
// encoder).
#include <sndfile.h>

#include <string>

#include "media/aac_encoder.h"
#include "media/audio.h"

namespace omnirt::media {
namespace {

bool libsndfile_can_write(int major, int subtype, int sample_rate, int channels) {
    SF_INFO info{};
    info.samplerate = sample_rate;
    info.channels = channels;
    info.format = major | subtype;
    return sf_format_check(&info) == SF_TRUE;
}

}  // namespace

Result<AudioFormat> parse_audio_format(std::string_view name) {
    if (name == "wav") return AudioFormat::wav;
    if (name == "pcm") return AudioFormat::pcm;
    if (name == "flac") return AudioFormat::flac;
    if (name == "opus") return AudioFormat::opus;
    if (name == "mp3") return AudioFormat::mp3;
    if (name == "aac") return AudioFormat::aac;
    std::string shown(name.substr(0, 64));
    return fail(ErrorCode::invalid_argument, "unsupported audio format '" + shown +
                                                 "'; accepted: wav, pcm, flac, opus, mp3, aac");
}

std::string_view to_string(AudioFormat format) {
    switch (format) {
        case AudioFormat::wav:
            return "wav";
        case AudioFormat::pcm:
            return "pcm";
        case AudioFormat::flac:
            return "flac";
        case AudioFormat::opus:
            return "opus";
        case AudioFormat::mp3:
            return "mp3";
        case AudioFormat::aac:
            return "aac";
    }
    return "unknown";
}

std::string_view content_type(AudioFormat format) {
    switch (format) {
        case AudioFormat::wav:
            return "audio/wav";
        case AudioFormat::pcm:
            return "audio/pcm";
        case AudioFormat::flac:
            return "audio/flac";
        case AudioFormat::opus:
            return "audio/ogg";
        case AudioFormat::mp3:
            return "audio/mpeg";
        case AudioFormat::aac:
            return "audio/aac";
    }
    return "application/octet-stream";
}

bool format_available(AudioFormat format) {
    // sf_format_check is a pure table lookup; the statics make the probe once per process.
    switch (format) {
        case AudioFormat::wav:
        case AudioFormat::pcm:
            return true;
        case AudioFormat::flac: {
            static const bool available =
                libsndfile_can_write(SF_FORMAT_FLAC, SF_FORMAT_PCM_16, 48000, 1);
            return available;
        }
        case AudioFormat::opus: {
            static const bool available =
                libsndfile_can_write(SF_FORMAT_OGG, SF_FORMAT_OPUS, 48000, 1);
            return available;
        }
        case AudioFormat::mp3: {
            static const bool available =
                libsndfile_can_write(SF_FORMAT_MPEG, SF_FORMAT_MPEG_LAYER_III, 48000, 1);
            return available;
        }
        case AudioFormat::aac:
            return detail::aac_available();
    }
    return false;
}

}  // namespace omnirt::media
