// AudioBuffer checks and the Tensor conversions.
#include <bit>
#include <cstring>
#include <string>

#include "media/audio.h"

namespace omnirt::media {
namespace {

float half_to_float(std::uint16_t half) {
    const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000) << 16;
    std::uint32_t exponent = (half >> 10) & 0x1F;
    std::uint32_t mantissa = half & 0x3FF;
    std::uint32_t bits = 0;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int shift = 0;
            while ((mantissa & 0x400) == 0) {
                mantissa <<= 1;
                ++shift;
            }
            mantissa &= 0x3FF;
            bits = sign | static_cast<std::uint32_t>(127 - 15 - shift + 1) << 23 | mantissa << 13;
        }
    } else if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | mantissa << 13;
    } else {
        bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
    }
    return std::bit_cast<float>(bits);
}

template <class Load>
void fill(AudioBuffer& out, const std::byte* data, std::size_t element_size, std::int64_t channels,
          std::int64_t frames, Load load) {
    // Source is contiguous [channels, frames]; destination interleaved.
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t f = 0; f < frames; ++f) {
            out.samples[static_cast<std::size_t>(f * channels + c)] =
                load(data + static_cast<std::size_t>(c * frames + f) * element_size);
        }
    }
}

template <class T>
T load_as(const std::byte* p) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
}

}  // namespace

Status validate(const AudioBuffer& buffer) {
    if (buffer.sample_rate < kMinSampleRate || buffer.sample_rate > kMaxSampleRate) {
        return fail(ErrorCode::invalid_argument,
                    "audio sample rate " + std::to_string(buffer.sample_rate) + " is outside " +
                        std::to_string(kMinSampleRate) + ".." + std::to_string(kMaxSampleRate));
    }
    if (buffer.channels < 1 || buffer.channels > kMaxChannels) {
        return fail(ErrorCode::invalid_argument,
                    "audio channel count " + std::to_string(buffer.channels) + " is outside 1.." +
                        std::to_string(kMaxChannels));
    }
    if (buffer.samples.size() % static_cast<std::size_t>(buffer.channels) != 0) {
        return fail(ErrorCode::invalid_argument, "audio sample count " +
                                                     std::to_string(buffer.samples.size()) +
                                                     " is not a multiple of the channel count " +
                                                     std::to_string(buffer.channels));
    }
    return ok_status();
}

Result<AudioBuffer> audio_from_tensor(const Tensor& tensor, int sample_rate) {
    if (!tensor.defined()) return fail(ErrorCode::invalid_argument, "audio tensor is undefined");
    if (!tensor.device().is_cpu()) {
        return fail(ErrorCode::invalid_argument,
                    "audio tensor is on " + tensor.device().to_string() + "; copy it to cpu first");
    }
    std::int64_t channels = 1;
    std::int64_t frames = 0;
    if (tensor.dim() == 1) {
        frames = tensor.shape()[0];
    } else if (tensor.dim() == 2) {
        channels = tensor.shape()[0];
        frames = tensor.shape()[1];
    } else {
        return fail(ErrorCode::invalid_argument,
                    "audio tensor must be [samples] or [channels, samples], got " +
                        std::to_string(tensor.dim()) + " dimensions");
    }
    if (channels < 1 || channels > kMaxChannels) {
        return fail(ErrorCode::invalid_argument, "audio tensor has " + std::to_string(channels) +
                                                     " channels; 1.." +
                                                     std::to_string(kMaxChannels) + " allowed");
    }
    AudioBuffer out{
        .sample_rate = sample_rate, .channels = static_cast<int>(channels), .samples = {}};
    OMNI_RETURN_IF_ERROR(validate(out));
    OMNI_TRY(Tensor dense, tensor.contiguous());
    out.samples.resize(static_cast<std::size_t>(channels * frames));
    const std::byte* data = dense.data();
    const std::size_t size = dense.element_size();
    switch (dense.dtype()) {
        case DType::f32:
            fill(out, data, size, channels, frames, load_as<float>);
            break;
        case DType::f64:
            fill(out, data, size, channels, frames,
                 [](const std::byte* p) { return static_cast<float>(load_as<double>(p)); });
            break;
        case DType::f16:
            fill(out, data, size, channels, frames,
                 [](const std::byte* p) { return half_to_float(load_as<std::uint16_t>(p)); });
            break;
        case DType::bf16:
            fill(out, data, size, channels, frames, [](const std::byte* p) {
                return std::bit_cast<float>(std::uint32_t{load_as<std::uint16_t>(p)} << 16);
            });
            break;
        case DType::i16:
            fill(out, data, size, channels, frames, [](const std::byte* p) {
                return static_cast<float>(load_as<std::int16_t>(p)) / 32768.0f;
            });
            break;
        default:
            return fail(ErrorCode::invalid_argument,
                        "audio tensor dtype " + std::string(to_string(dense.dtype())) +
                            " is not supported (float32, float64, float16, bfloat16, int16)");
    }
    return out;
}

Result<Tensor> audio_to_tensor(const AudioBuffer& buffer) {
    OMNI_RETURN_IF_ERROR(validate(buffer));
    const std::int64_t channels = buffer.channels;
    const std::int64_t frames = buffer.frames();
    OMNI_TRY(Tensor tensor, Tensor::empty({channels, frames}, DType::f32));
    auto* out = reinterpret_cast<float*>(tensor.mutable_data());
    for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t f = 0; f < frames; ++f) {
            out[c * frames + f] = buffer.samples[static_cast<std::size_t>(f * channels + c)];
        }
    }
    return tensor;
}

}  // namespace omnirt::media
