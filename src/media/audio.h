#pragma once
// Audio buffers, formats and the codec helpers the serve layer uses for `input_audio`,
// `message.audio` and `/v1/audio/speech`. Pure functions over memory: no temp files, no threads,
// safe to call from any thread concurrently (libsndfile and libsoxr keep per-call state only).
// Never call these on an IO loop thread for long inputs: encoding and resampling are CPU work.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::media {
namespace detail {
class AacEncoder;
}  // namespace detail

// Interleaved float samples, nominally in -1..1 (encoders clamp; NaN encodes as silence).
struct AudioBuffer {
    int sample_rate = 0;
    int channels = 1;
    std::vector<float> samples;  // frames * channels, interleaved

    [[nodiscard]] std::int64_t frames() const {
        return channels > 0 ? static_cast<std::int64_t>(samples.size()) / channels : 0;
    }
    [[nodiscard]] double duration_seconds() const {
        return sample_rate > 0 ? static_cast<double>(frames()) / sample_rate : 0.0;
    }
};

// Limits applied to every buffer these helpers accept or produce.
inline constexpr int kMinSampleRate = 1000;
inline constexpr int kMaxSampleRate = 768000;
inline constexpr int kMaxChannels = 16;

// Checks sample_rate, channels and that samples.size() is a multiple of channels.
[[nodiscard]] Status validate(const AudioBuffer& buffer);

// A Tensor of audio samples: 1-D [n] (mono) or 2-D [channels, n]; dtype float32, float64,
// float16, bfloat16 (taken as -1..1) or int16 (divided by 32768). Host tensors only; strided
// views are gathered.
[[nodiscard]] Result<AudioBuffer> audio_from_tensor(const Tensor& tensor, int sample_rate);
// A float32 tensor [channels, frames] (de-interleaved) holding a copy of the samples.
[[nodiscard]] Result<Tensor> audio_to_tensor(const AudioBuffer& buffer);

// ---- formats ---------------------------------------------------------------------------------

enum class AudioFormat : std::uint8_t { wav, pcm, flac, opus, mp3, aac };

// "wav", "pcm", "flac", "opus", "mp3", "aac" (case-sensitive, as OpenAI's response_format).
// Anything else: invalid_argument naming the accepted formats. mp3 and aac parse even where this
// build cannot write them; encode_audio then reports unimplemented (check format_available
// first).
[[nodiscard]] Result<AudioFormat> parse_audio_format(std::string_view name);
[[nodiscard]] std::string_view to_string(AudioFormat format);
// audio/wav, audio/pcm, audio/flac, audio/ogg (Ogg Opus), audio/mpeg, audio/aac (ADTS).
[[nodiscard]] std::string_view content_type(AudioFormat format);
// Whether this build can write the format: wav and pcm always; flac, opus, mp3 when libsndfile
// can (probed once at runtime with sf_format_check); aac when FFmpeg with its native AAC encoder
// is linked (OMNIRT_FFMPEG).
[[nodiscard]] bool format_available(AudioFormat format);

// ---- whole-buffer encode / decode -------------------------------------------------------------

// Encodes the whole buffer:
//   wav  RIFF/WAVE PCM16 little-endian, 44-byte header, exact sizes.
//   pcm  raw s16le interleaved, no header (the client must know rate and channels).
//   flac 16-bit FLAC.
//   opus Ogg Opus. Opus runs at 8, 12, 16, 24 or 48 kHz: other rates are resampled to 48 kHz
//        first (libsoxr); the decoded stream reports the rate encoded.
//   mp3  MPEG-1/2 Layer III (LAME through libsndfile), mono or stereo. Rates MP3 has (8, 11.025,
//        12, 16, 22.05, 24, 32, 44.1, 48 kHz) are kept, others are resampled to 48 kHz.
//   aac  AAC-LC in ADTS frames (FFmpeg's native encoder, 64 kbit/s per channel), mono or stereo.
//        Rates ADTS has (7.35, 8, 11.025, 12, 16, 22.05, 24, 32, 44.1, 48, 64, 88.2, 96 kHz) are
//        kept, others are resampled to 48 kHz. A decoder's output starts with 1024 frames of
//        encoder priming and ends padded to a multiple of 1024 frames.
// Float samples are clamped to -1..1 (NaN becomes 0); wav and pcm quantise as lrint(x * 32767),
// the libsndfile codecs with libsndfile's own float conversion.
// Errors: invalid_argument (bad buffer, too many channels for the format), unimplemented (format
// not available in this build), internal (codec failure, with the codec library's message).
[[nodiscard]] Result<std::string> encode_audio(const AudioBuffer& buffer, AudioFormat format);

struct DecodeOptions {
    // Upper bound on frames * channels decoded; larger inputs fail with resource_exhausted, so a
    // hostile header (e.g. a WAV claiming 2^31 frames) cannot make the decoder allocate more
    // than this. 48 kHz stereo for 10 minutes by default.
    std::int64_t max_decoded_samples = std::int64_t{48000} * 2 * 600;
};

// Decodes any container libsndfile reads (wav, flac, ogg vorbis/opus, mp3, aiff, ...), from
// memory. Errors: invalid_argument for empty, unrecognised or malformed input (libsndfile's
// message included), resource_exhausted past max_decoded_samples, data_loss when the stream
// fails part way. Non-finite samples (float files) decode as 0.
[[nodiscard]] Result<AudioBuffer> decode_audio(std::span<const std::byte> bytes,
                                               const DecodeOptions& options = {});

// ---- rate and speed ---------------------------------------------------------------------------

// The number of frames resample() produces: round(frames * to_rate / from_rate), half up.
[[nodiscard]] std::int64_t resampled_frames(std::int64_t frames, int from_rate, int to_rate);
// High-quality resampling (libsoxr, HQ). Output has exactly resampled_frames() frames. Same
// rate returns a copy.
[[nodiscard]] Result<AudioBuffer> resample(const AudioBuffer& buffer, int sample_rate);
// Plays the audio `factor` times faster (0.25..4.0) by resampling and keeping the sample rate:
// the duration becomes frames / factor (rounded) and the pitch scales by `factor` as well (a
// tape-speed change, not a time stretch). factor 1 returns a copy.
[[nodiscard]] Result<AudioBuffer> change_speed(const AudioBuffer& buffer, double factor);

// ---- streaming ---------------------------------------------------------------------------------

// Whether AudioStreamEncoder emits this format's bytes as chunks arrive (wav, pcm, aac) or only
// the whole file at finish() (flac, opus, mp3: their libsndfile writers seek back into what they
// wrote to fix headers, so bytes cannot go out before the end).
[[nodiscard]] bool streams_incrementally(AudioFormat format);

// Encodes audio that arrives in chunks (the SSE / chunked speech path). One encoder per
// response; not thread-safe (one caller at a time). All chunks must carry the sample rate and
// channel count given at creation.
//   pcm  each push returns that chunk as s16le.
//   wav  the first push (or finish(), if nothing was pushed) returns a 44-byte header whose
//        RIFF and data sizes are 0xFFFFFFFF (length unknown, as streaming servers send), then
//        PCM16 data; readers that honour the streaming convention read to end of stream.
//   aac  each push returns the ADTS frames complete so far (the encoder holds up to about two
//        AAC frames of samples: 1024 frames each); finish() returns the rest. One encoder runs
//        across all chunks, so the concatenated bytes equal one continuous ADTS stream.
//   flac, opus, mp3  push buffers the samples (bounded by max_buffered_samples) and returns
//        nothing; finish() returns the whole file from encode_audio().
class AudioStreamEncoder {
  public:
    struct Options {
        AudioFormat format = AudioFormat::pcm;
        int sample_rate = 24000;
        int channels = 1;
        // Buffered formats only: total samples held before finish(); more is resource_exhausted.
        std::int64_t max_buffered_samples = std::int64_t{48000} * 2 * 600;
    };

    // invalid_argument for a bad rate / channel count, unimplemented when the format cannot be
    // written by this build.
    [[nodiscard]] static Result<AudioStreamEncoder> create(const Options& options);
    ~AudioStreamEncoder();
    AudioStreamEncoder(AudioStreamEncoder&&) noexcept;
    AudioStreamEncoder& operator=(AudioStreamEncoder&&) noexcept;

    // Bytes to send now (possibly empty). Fails on a chunk whose rate or channels differ, and
    // after finish().
    [[nodiscard]] Result<std::string> push(const AudioBuffer& chunk);
    // The remaining bytes; the encoder is finished afterwards (push and finish fail).
    [[nodiscard]] Result<std::string> finish();

    [[nodiscard]] const Options& options() const { return options_; }

  private:
    explicit AudioStreamEncoder(const Options& options);

    Options options_;
    bool header_sent_ = false;
    bool finished_ = false;
    AudioBuffer pending_;  // buffered formats
    std::unique_ptr<detail::AacEncoder> aac_;
};

}  // namespace omnirt::media
