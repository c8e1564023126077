#include "models/qwen3_omni/code2wav.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "torch_bridge/torch_errors.h"

namespace omnirt::models::qwen3_omni {
namespace {

// transformers' ConvNeXtBlock LayerNorm.
constexpr double kConvNeXtNormEps = 1e-6;
// Queries per attention matmul: scores are [B, heads, block, block + window - 1] at most, so a
// long whole-utterance decode never builds a T x T matrix.
constexpr std::int64_t kQueryBlock = 256;

// transformers' RMSNorm: in float32, cast back, times the weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::Tensor hidden = x.to(at::kFloat);
    const at::Tensor normed = hidden * at::rsqrt(hidden.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * normed.to(x.scalar_type());
}

at::Tensor rotate_half(const at::Tensor& x) {
    const std::int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// Zero left padding of (k - 1) * dilation, then a plain Conv1d: the length is kept.
at::Tensor causal_conv(const at::Tensor& x, const Code2Wav::Conv& conv, std::int64_t dilation = 1,
                       std::int64_t groups = 1) {
    const std::int64_t padding = (conv.weight.size(2) - 1) * dilation;
    const std::int64_t stride = 1;
    const std::int64_t no_padding = 0;
    return at::conv1d(at::constant_pad_nd(x, {padding, 0}), conv.weight, conv.bias,
                      at::IntArrayRef(stride), at::IntArrayRef(no_padding),
                      at::IntArrayRef(dilation), groups);
}

// ConvTranspose1d(k, s) without its first and last k - s samples: L -> (L - 1) * s + 2s - k.
at::Tensor causal_transposed_conv(const at::Tensor& x, const Code2Wav::Conv& conv,
                                  std::int64_t stride) {
    const std::int64_t trim = conv.weight.size(2) - stride;
    at::Tensor y;
    if (x.scalar_type() == at::kBFloat16 && x.device().is_cpu()) {
        // libtorch 1.13's CPU bfloat16 ConvTranspose1d mixes up input and output channels
        // ("weight of size [64, 32, 1, 16], expected input to have 32 channels") when they
        // differ: run it in float32 and round the result, as a bfloat16 kernel accumulating in
        // float32 would.
        y = at::conv_transpose1d(x.to(at::kFloat), conv.weight.to(at::kFloat),
                                 conv.bias.to(at::kFloat), stride)
                .to(at::kBFloat16);
    } else {
        y = at::conv_transpose1d(x, conv.weight, conv.bias, stride);
    }
    return y.narrow(2, trim, y.size(2) - 2 * trim).contiguous();
}

at::Tensor snake(const at::Tensor& x, const Code2Wav::Snake& snake) {
    return x + snake.inverse_magnitude * at::sin(x * snake.frequency).pow(2);
}

at::Tensor convnext(const at::Tensor& x, const Code2Wav::ConvNeXt& block) {
    at::Tensor y = causal_conv(x, block.depthwise, 1, x.size(1)).permute({0, 2, 1});
    y = linear(layer_norm(y, block.norm, kConvNeXtNormEps), block.pointwise1);
    y = linear(at::gelu(y), block.pointwise2);
    return x + (block.gamma * y).permute({0, 2, 1});
}

at::Tensor residual_unit(const at::Tensor& x, const Code2Wav::ResidualUnit& unit) {
    at::Tensor y = causal_conv(snake(x, unit.act1), unit.conv1, unit.dilation);
    y = causal_conv(snake(y, unit.act2), unit.conv2);
    return y + x;
}

std::string shape_text(const at::Tensor& x) {
    std::string text = "[";
    for (std::int64_t d = 0; d < x.dim(); ++d)
        text += (d > 0 ? ", " : "") + std::to_string(x.size(d));
    return text + "]";
}

}  // namespace

Result<at::Tensor> Code2Wav::checked_codes(const at::Tensor& codes) const {
    const std::string what = "Qwen3-Omni code2wav: codes";
    const std::int64_t quantizers = config_.num_quantizers;
    if (!codes.defined()) return fail(ErrorCode::invalid_argument, what + " are undefined");
    if (codes.dim() != 3 || codes.size(0) < 1 || codes.size(1) != quantizers || codes.size(2) < 1) {
        return fail(ErrorCode::invalid_argument,
                    what + " must be [batch >= 1, " + std::to_string(quantizers) +
                        " quantizers, frames >= 1], not " + shape_text(codes));
    }
    if (!at::isIntegralType(codes.scalar_type(), /*includeBool=*/false)) {
        return fail(
            ErrorCode::invalid_argument,
            what + " must be integers, not " + std::string(c10::toString(codes.scalar_type())));
    }
    try {
        const at::Tensor converted = codes.to(options_.device, at::kLong).contiguous();
        const at::Tensor bad = (converted < 0).logical_or(converted >= config_.codebook_size);
        if (bad.any().item<bool>()) {
            const at::Tensor where = bad.nonzero()[0].cpu();
            const std::int64_t b = where[0].item<std::int64_t>();
            const std::int64_t q = where[1].item<std::int64_t>();
            const std::int64_t t = where[2].item<std::int64_t>();
            return fail(ErrorCode::invalid_argument,
                        what + " must be in [0, " + std::to_string(config_.codebook_size) +
                            "): sequence " + std::to_string(b) + ", quantizer " +
                            std::to_string(q) + ", frame " + std::to_string(t) + " holds " +
                            std::to_string(converted[b][q][t].item<std::int64_t>()));
        }
        return converted;
    } catch (const std::exception&) {
        return fail(ErrorCode::internal,
                    what + ": cannot read them: " + torch_bridge::current_exception_text());
    }
}

at::Tensor Code2Wav::attention(const Layer& layer, const at::Tensor& x, const at::Tensor& cos,
                               const at::Tensor& sin) const {
    const std::int64_t batch = x.size(0);
    const std::int64_t frames = x.size(1);
    const std::int64_t heads = config_.num_attention_heads;
    const std::int64_t kv_heads = config_.num_key_value_heads;
    const std::int64_t head_dim = config_.head_dim();
    const std::int64_t window = config_.sliding_window;
    const at::Tensor qkv = at::linear(x, layer.qkv);
    // [B, T, n * d] -> [B, n, T, d], rotated for q and k.
    auto part = [&](std::int64_t offset, std::int64_t count) {
        return qkv.narrow(2, offset * head_dim, count * head_dim)
            .view({batch, frames, count, head_dim})
            .transpose(1, 2);
    };
    const at::Tensor q = part(0, heads) * cos + rotate_half(part(0, heads)) * sin;
    at::Tensor k = part(heads, kv_heads) * cos + rotate_half(part(heads, kv_heads)) * sin;
    at::Tensor v = part(heads + kv_heads, kv_heads);
    if (kv_heads != heads) {
        k = k.repeat_interleave(heads / kv_heads, 1);
        v = v.repeat_interleave(heads / kv_heads, 1);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const at::TensorOptions index_options = at::TensorOptions(at::kLong).device(x.device());
    std::vector<at::Tensor> outputs;
    for (std::int64_t first = 0; first < frames; first += kQueryBlock) {
        const std::int64_t end = std::min(first + kQueryBlock, frames);
        const std::int64_t key_first = std::max<std::int64_t>(0, first - window + 1);
        const at::Tensor queries = at::arange(first, end, index_options).unsqueeze(1);
        const at::Tensor keys = at::arange(key_first, end, index_options).unsqueeze(0);
        // Query i sees keys i - window < j <= i (every row sees at least itself).
        const at::Tensor hidden = (keys > queries).logical_or(keys <= queries - window);
        const at::Tensor scores =
            at::matmul(q.narrow(2, first, end - first),
                       k.narrow(2, key_first, end - key_first).transpose(-2, -1)) *
            scale;
        const at::Tensor probabilities =
            scores.masked_fill(hidden, -std::numeric_limits<double>::infinity())
                .softmax(-1, at::kFloat)
                .to(q.scalar_type());
        outputs.push_back(at::matmul(probabilities, v.narrow(2, key_first, end - key_first)));
    }
    const at::Tensor attended = outputs.size() == 1 ? outputs[0] : at::cat(outputs, 2);
    return at::linear(attended.transpose(1, 2).reshape({batch, frames, heads * head_dim}),
                      layer.o_proj);
}

at::Tensor Code2Wav::run_pre_transformer(const at::Tensor& codes) const {
    at::Tensor x =
        at::embedding(weights_.code_embedding, codes + weights_.code_offsets).mean(1);  // [B,T,H]
    // RoPE at positions 0..T-1 of this call: float32 angles, cos/sin cast to the compute dtype.
    const at::Tensor positions =
        at::arange(codes.size(2), at::TensorOptions(at::kLong).device(codes.device()))
            .to(at::kFloat);
    const at::Tensor angles = positions.unsqueeze(1) * weights_.inverse_frequencies.unsqueeze(0);
    const at::Tensor doubled = at::cat({angles, angles}, -1);
    const at::Tensor cos = doubled.cos().to(options_.dtype);
    const at::Tensor sin = doubled.sin().to(options_.dtype);
    const double eps = config_.rms_norm_eps;
    const std::int64_t ffn = config_.intermediate_size;
    for (const Layer& layer : weights_.layers) {
        x = x + layer.attention_scale *
                    attention(layer, rms_norm(x, layer.attention_norm, eps), cos, sin);
        const at::Tensor gate_up = at::linear(rms_norm(x, layer.mlp_norm, eps), layer.gate_up);
        const at::Tensor hidden =
            at::silu(gate_up.narrow(-1, 0, ffn)) * gate_up.narrow(-1, ffn, ffn);
        x = x + layer.mlp_scale * at::linear(hidden, layer.down);
    }
    return rms_norm(x, weights_.final_norm, eps);
}

at::Tensor Code2Wav::run(const at::Tensor& codes) const {
    at::Tensor x = run_pre_transformer(codes).permute({0, 2, 1});  // [B, H, T]
    for (const Upsample& stage : weights_.upsample) {
        x = convnext(causal_transposed_conv(x, stage.transposed, stage.ratio), stage.convnext);
    }
    x = causal_conv(x, weights_.decoder_in);
    for (const DecoderBlock& block : weights_.blocks) {
        x = causal_transposed_conv(snake(x, block.snake), block.transposed, block.rate);
        for (const ResidualUnit& unit : block.units) x = residual_unit(x, unit);
    }
    x = causal_conv(snake(x, weights_.decoder_snake), weights_.decoder_out);
    return x.clamp(-1.0, 1.0).to(at::kFloat);
}

Result<at::Tensor> Code2Wav::pre_transformer(const at::Tensor& codes) const {
    OMNI_TRY(const at::Tensor checked, checked_codes(codes));
    try {
        c10::NoGradGuard no_grad;
        return run_pre_transformer(checked);
    } catch (const std::exception&) {
        return fail(ErrorCode::internal, "Qwen3-Omni code2wav: pre-transformer failed: " +
                                             torch_bridge::current_exception_text());
    }
}

Result<at::Tensor> Code2Wav::forward(const at::Tensor& codes) const {
    return decode_chunk(codes, 0);
}

Result<at::Tensor> Code2Wav::decode_chunk(const at::Tensor& codes,
                                          std::int64_t context_frames) const {
    OMNI_TRY(const at::Tensor checked, checked_codes(codes));
    const std::int64_t frames = checked.size(2);
    if (context_frames < 0 || context_frames >= frames) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni code2wav: context_frames must be in [0, " + std::to_string(frames) +
                        ") for " + std::to_string(frames) + " frames of codes, not " +
                        std::to_string(context_frames));
    }
    try {
        c10::NoGradGuard no_grad;
        const at::Tensor wav = run(checked);
        const std::int64_t skip = context_frames * config_.total_upsample();
        return wav.narrow(2, skip, wav.size(2) - skip);
    } catch (const std::exception&) {
        return fail(ErrorCode::internal, "Qwen3-Omni code2wav: forward failed: " +
                                             torch_bridge::current_exception_text());
    }
}

Result<at::Tensor> Code2Wav::chunked_decode(const at::Tensor& codes, std::int64_t chunk_size,
                                            std::int64_t left_context) const {
    if (chunk_size < 1 || left_context < 0) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni code2wav: chunk_size must be >= 1 and left_context >= 0, not " +
                        std::to_string(chunk_size) + " and " + std::to_string(left_context));
    }
    OMNI_TRY(const at::Tensor checked, checked_codes(codes));
    try {
        c10::NoGradGuard no_grad;
        std::vector<at::Tensor> pieces;
        for (const Code2WavChunk& chunk :
             code2wav_chunks(checked.size(2), chunk_size, left_context)) {
            const at::Tensor wav = run(checked.narrow(2, chunk.first_frame(), chunk.frames()));
            const std::int64_t skip = chunk.context * config_.total_upsample();
            pieces.push_back(wav.narrow(2, skip, wav.size(2) - skip));
        }
        return pieces.size() == 1 ? pieces[0] : at::cat(pieces, 2);
    } catch (const std::exception&) {
        return fail(ErrorCode::internal, "Qwen3-Omni code2wav: chunked decode failed: " +
                                             torch_bridge::current_exception_text());
    }
}

}  // namespace omnirt::models::qwen3_omni
