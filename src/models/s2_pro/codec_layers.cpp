#include "models/s2_pro/codec_layers.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "checkpoint/safetensors.h"
#include "checkpoint/torch_checkpoint.h"
#include "models/qwen3/layers.h"
#include "models/s2_pro/codec_snake.h"
#include "models/s2_pro/fish_layers.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro::codec {
namespace {

std::string shape_text(at::IntArrayRef sizes) {
    std::string out = "[";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
    }
    return out + "]";
}

at::Tensor fold(const at::Tensor& g, const at::Tensor& v) {
    const at::Tensor norm = v.pow(2).sum({1, 2}, /*keepdim=*/true).sqrt();
    return (g * v / norm).contiguous();
}

// The window [B, C, context + T] of a causal conv for an input of T samples: `carry` (zeros
// before the first call), reallocated with its context kept when T changed. The caller writes
// the input after the context.
at::Tensor& window_for(const at::Tensor& x, std::int64_t context, at::ScalarType dtype,
                       at::Tensor& carry) {
    const std::int64_t width = context + x.size(2);
    if (!carry.defined()) {
        carry = at::zeros({x.size(0), x.size(1), width}, x.options().dtype(dtype));
    } else if (carry.size(2) != width) {
        at::Tensor resized = at::empty({x.size(0), x.size(1), width}, carry.options());
        resized.narrow(2, 0, context).copy_(carry.narrow(2, 0, context));
        carry = std::move(resized);
    }
    return carry;
}

// After a conv over `window`: its last `context` samples become the next call's context.
void slide(at::Tensor& window, std::int64_t context) {
    const std::int64_t width = window.size(2);
    const std::int64_t frames = width - context;
    if (frames == 0) return;
    auto* base = static_cast<char*>(window.data_ptr());
    const auto element = static_cast<std::int64_t>(window.element_size());
    const std::int64_t rows = window.size(0) * window.size(1);
    for (std::int64_t r = 0; r < rows; ++r) {
        char* row = base + r * width * element;
        std::memmove(row, row + frames * element, static_cast<std::size_t>(context * element));
    }
}

at::Tensor run_conv(const at::Tensor& input, const CodecConv& conv) {
    const std::int64_t stride = 1, padding = 0;
    return at::conv1d(input, conv.weight, conv.bias, at::IntArrayRef(stride),
                      at::IntArrayRef(padding), at::IntArrayRef(conv.dilation), conv.groups);
}

// frames [B, out * stride, T] -> [B, out, T * stride]: channel c * stride + j of frame t is
// sample t * stride + j of channel c. One pass (a strided copy through ATen moves a few samples
// per inner loop); Word is the element's size.
template <typename Word>
void interleave_rows(const Word* in, Word* out, std::int64_t rows, std::int64_t stride,
                     std::int64_t length) {
    const std::int64_t block = stride * length;
    const std::int64_t grain = std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(block, 1));
    at::parallel_for(0, rows, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const Word* source = in + r * block;
            Word* target = out + r * block;
            for (std::int64_t t = 0; t < length; ++t) {
                for (std::int64_t j = 0; j < stride; ++j) {
                    target[t * stride + j] = source[j * length + t];
                }
            }
        }
    });
}

at::Tensor interleave(const at::Tensor& frames, std::int64_t stride) {
    const at::Tensor in = frames.contiguous();
    const std::int64_t batch = in.size(0), out = in.size(1) / stride, length = in.size(2);
    at::Tensor result = at::empty({batch, out, length * stride}, in.options());
    if (in.element_size() == 2) {
        interleave_rows(static_cast<const std::uint16_t*>(in.data_ptr()),
                        static_cast<std::uint16_t*>(result.data_ptr()), batch * out, stride,
                        length);
    } else {
        OMNI_CHECK(in.element_size() == 4, "codec: float32 or bfloat16 activations only");
        interleave_rows(static_cast<const std::uint32_t*>(in.data_ptr()),
                        static_cast<std::uint32_t*>(result.data_ptr()), batch * out, stride,
                        length);
    }
    return result;
}

std::int64_t context_of(const CodecConv& conv) { return (conv.weight.size(2) - 1) * conv.dilation; }

// Snake of x [B, C, T] (contiguous) into out, rows of `out_stride` samples from `out_offset`.
void snake_into(const at::Tensor& x, const at::Tensor& alpha, at::Tensor& out,
                std::int64_t out_offset, std::int64_t out_stride) {
    OMNI_CHECK(alpha.scalar_type() == at::kFloat && alpha.is_contiguous(),
               "codec: Snake alphas must be contiguous float32");
    const at::Tensor in = x.contiguous();
    const std::int64_t rows = in.size(0) * in.size(1), length = in.size(2);
    const float* a = alpha.data_ptr<float>();
    if (in.scalar_type() == at::kBFloat16) {
        snake_rows(in.data_ptr<c10::BFloat16>(), length, out.data_ptr<c10::BFloat16>() + out_offset,
                   out_stride, rows, length, a, in.size(1));
    } else {
        OMNI_CHECK(in.scalar_type() == at::kFloat, "codec: Snake of float32 or bfloat16 only");
        snake_rows(in.data_ptr<float>(), length, out.data_ptr<float>() + out_offset, out_stride,
                   rows, length, a, in.size(1));
    }
}

}  // namespace

Result<at::Tensor> CodecLoader::get(const std::string& name,
                                    const std::vector<std::int64_t>& shape) const {
    auto tensor = lookup_(name);
    if (!tensor) return fail(tensor.error().with_context("codec weight '" + name + "'"));
    const at::Tensor source = torch_bridge::to_torch(*tensor);
    if (!at::isFloatingType(source.scalar_type())) {
        return fail(ErrorCode::invalid_argument,
                    "codec weight '" + name + "' has a non-floating dtype");
    }
    if (source.sizes() != at::IntArrayRef(shape)) {
        return fail(ErrorCode::invalid_argument, "codec weight '" + name + "' has shape " +
                                                     shape_text(source.sizes()) + ", expected " +
                                                     shape_text(shape));
    }
    return source.to(device_, at::kFloat).contiguous();
}

Result<CodecConv> CodecLoader::weight_normed(const std::string& prefix,
                                             const std::vector<std::int64_t>& shape,
                                             std::int64_t dilation, bool transposed) const {
    const std::string base = prefix + ".conv.parametrizations.weight.";
    OMNI_TRY(at::Tensor g, get(base + "original0", {shape[0], 1, 1}));
    OMNI_TRY(at::Tensor v, get(base + "original1", shape));
    // The bias has the output channels: dim 0 of a Conv1d weight, dim 1 of a transposed one.
    OMNI_TRY(at::Tensor bias, get(prefix + ".conv.bias", {transposed ? shape[1] : shape[0]}));
    return CodecConv{.weight = fold(g, v), .bias = bias, .dilation = dilation};
}

Result<CodecConv> CodecLoader::legacy_weight_normed(const std::string& prefix,
                                                    const std::vector<std::int64_t>& shape) const {
    OMNI_TRY(at::Tensor g, get(prefix + ".weight_g", {shape[0], 1, 1}));
    OMNI_TRY(at::Tensor v, get(prefix + ".weight_v", shape));
    OMNI_TRY(at::Tensor bias, get(prefix + ".bias", {shape[0]}));
    return CodecConv{.weight = fold(g, v), .bias = bias};
}

Result<CodecTransformer> CodecLoader::transformer(const std::string& prefix, std::int64_t layers,
                                                  std::int64_t dim, std::int64_t intermediate,
                                                  std::int64_t window) const {
    CodecTransformer out{.layers = {}, .norm = {}, .window = window};
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::string layer = prefix + ".layers." + std::to_string(l) + ".";
        CodecTransformerLayer w;
        OMNI_TRY(w.attention_norm, get(layer + "attention_norm.weight", {dim}));
        OMNI_TRY(at::Tensor wqkv, get(layer + "attention.wqkv.weight", {3 * dim, dim}));
        w.wqkv = at::cat({deinterleave_heads(wqkv.narrow(0, 0, dim), kCodecHeadDim),
                          deinterleave_heads(wqkv.narrow(0, dim, dim), kCodecHeadDim),
                          wqkv.narrow(0, 2 * dim, dim)})
                     .contiguous();
        OMNI_TRY(w.wo, get(layer + "attention.wo.weight", {dim, dim}));
        OMNI_TRY(w.attention_scale, get(layer + "attention_layer_scale.gamma", {dim}));
        OMNI_TRY(w.ffn_norm, get(layer + "ffn_norm.weight", {dim}));
        OMNI_TRY(at::Tensor w1, get(layer + "feed_forward.w1.weight", {intermediate, dim}));
        OMNI_TRY(at::Tensor w3, get(layer + "feed_forward.w3.weight", {intermediate, dim}));
        w.gate_up = at::cat({w1, w3}).contiguous();
        OMNI_TRY(w.down, get(layer + "feed_forward.w2.weight", {dim, intermediate}));
        OMNI_TRY(w.ffn_scale, get(layer + "ffn_layer_scale.gamma", {dim}));
        out.layers.push_back(std::move(w));
    }
    OMNI_TRY(out.norm, get(prefix + ".norm.weight", {dim}));
    return out;
}

Result<CodecConvNeXt> CodecLoader::convnext(const std::string& prefix, std::int64_t dim,
                                            std::int64_t intermediate) const {
    CodecConvNeXt out;
    OMNI_TRY(out.dwconv.weight, get(prefix + ".dwconv.conv.weight", {dim, 1, 7}));
    OMNI_TRY(out.dwconv.bias, get(prefix + ".dwconv.conv.bias", {dim}));
    out.dwconv.groups = dim;
    OMNI_TRY(out.norm_weight, get(prefix + ".norm.weight", {dim}));
    OMNI_TRY(out.norm_bias, get(prefix + ".norm.bias", {dim}));
    OMNI_TRY(out.pw1_weight, get(prefix + ".pwconv1.weight", {intermediate, dim}));
    OMNI_TRY(out.pw1_bias, get(prefix + ".pwconv1.bias", {intermediate}));
    OMNI_TRY(out.pw2_weight, get(prefix + ".pwconv2.weight", {dim, intermediate}));
    OMNI_TRY(out.pw2_bias, get(prefix + ".pwconv2.bias", {dim}));
    OMNI_TRY(out.gamma, get(prefix + ".gamma", {dim}));
    return out;
}

Result<CodecResidualUnit> CodecLoader::residual_unit(const std::string& prefix,
                                                     std::int64_t channels,
                                                     std::int64_t dilation) const {
    CodecResidualUnit out;
    OMNI_TRY(out.alpha1, get(prefix + ".block.0.alpha", {1, channels, 1}));
    OMNI_TRY(out.conv1, weight_normed(prefix + ".block.1", {channels, channels, 7}, dilation));
    OMNI_TRY(out.alpha2, get(prefix + ".block.2.alpha", {1, channels, 1}));
    OMNI_TRY(out.conv2, weight_normed(prefix + ".block.3", {channels, channels, 1}));
    return out;
}

// codec.safetensors, else the release's codec.pth (same keys either way).
Result<CodecFile> open_codec_file(const std::filesystem::path& directory) {
    const std::filesystem::path file = directory / kCodecFile;
    const std::filesystem::path pickle = directory / kCodecPickleFile;
    std::function<bool(const std::string&)> has;
    std::function<Shape(const std::string&)> shape;
    std::function<Result<Tensor>(const std::string&)> get;
    std::string path;
    if (std::filesystem::exists(file)) {
        OMNI_TRY(std::unique_ptr<checkpoint::SafetensorsFile> opened,
                 checkpoint::SafetensorsFile::open(file));
        std::shared_ptr<const checkpoint::SafetensorsFile> codec(std::move(opened));
        has = [codec](const std::string& name) { return codec->find(name) != nullptr; };
        shape = [codec](const std::string& name) {
            const checkpoint::TensorEntry* entry = codec->find(name);
            return entry == nullptr ? Shape{} : entry->shape;
        };
        get = [codec](const std::string& name) { return codec->tensor(name); };
        path = file.string();
    } else if (std::filesystem::exists(pickle)) {
        // The release's PyTorch checkpoint, read by the data-only pickle reader.
        OMNI_TRY(std::unique_ptr<checkpoint::TorchStateDict> opened,
                 checkpoint::TorchStateDict::open(pickle));
        std::shared_ptr<const checkpoint::TorchStateDict> codec(std::move(opened));
        has = [codec](const std::string& name) { return codec->find(name) != nullptr; };
        shape = [codec](const std::string& name) {
            const Tensor* tensor = codec->find(name);
            return tensor == nullptr ? Shape{} : tensor->shape();
        };
        get = [codec](const std::string& name) { return codec->tensor(name); };
        path = pickle.string();
    } else {
        return fail(ErrorCode::not_found, "no codec in " + directory.string() + " (" +
                                              std::string(kCodecFile) + " or " +
                                              std::string(kCodecPickleFile) + ")");
    }
    // fish-speech strips a "generator." prefix when the state dict has one.
    const std::string prefix = has("generator.decoder.model.0.conv.bias") ? "generator." : "";
    const ShapeOf shape_of = [&](const std::string& name) -> Shape { return shape(prefix + name); };
    auto sizes = infer_codec_sizes(shape_of);
    if (!sizes) return fail(sizes.error().with_context(path));
    return CodecFile{
        .path = path, .sizes = *sizes, .lookup = [get, prefix](const std::string& name) {
            return get(prefix + name);
        }};
}

at::Tensor snake(const at::Tensor& x, const at::Tensor& alpha) {
    at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    snake_into(x, alpha, out, 0, x.size(2));
    return out;
}

at::Tensor causal_conv(const at::Tensor& x, const CodecConv& conv, at::Tensor& carry) {
    const std::int64_t context = context_of(conv);
    if (context == 0) return run_conv(x.to(conv.weight.scalar_type()), conv);
    at::Tensor& window = window_for(x, context, conv.weight.scalar_type(), carry);
    window.narrow(2, context, x.size(2)).copy_(x);
    at::Tensor out = run_conv(window, conv);
    slide(window, context);
    return out;
}

at::Tensor snake_conv(const at::Tensor& x, const at::Tensor& alpha, const CodecConv& conv,
                      at::Tensor& carry) {
    const std::int64_t context = context_of(conv);
    if (context == 0) return run_conv(snake(x, alpha), conv);
    at::Tensor& window = window_for(x, context, x.scalar_type(), carry);
    snake_into(x, alpha, window, context, window.size(2));
    at::Tensor out = run_conv(window, conv);
    slide(window, context);
    return out;
}

CodecConv transposed_as_conv(const CodecConv& transposed, std::int64_t stride) {
    const std::int64_t in = transposed.weight.size(0), out = transposed.weight.size(1);
    const std::int64_t taps = transposed.weight.size(2) / stride;
    OMNI_CHECK(taps * stride == transposed.weight.size(2) && (taps == 1 || taps == 2),
               "codec: a transposed conv's kernel must be its stride or twice it");
    // Kernel index m * stride + j weighs frame t - m for sample j of frame t; conv tap
    // taps - 1 - m reads frame t - m.
    const at::Tensor weight = transposed.weight
                                  .permute({1, 2, 0})  // [out, kernel, in]
                                  .reshape({out, taps, stride, in})
                                  .flip({1})
                                  .permute({0, 2, 3, 1})  // [out, stride, in, taps]
                                  .reshape({out * stride, in, taps});
    return CodecConv{.weight = weight.contiguous(),
                     .bias = transposed.bias.repeat_interleave(stride).contiguous(),
                     .dilation = 1,
                     .groups = 1};
}

at::Tensor causal_transposed(const at::Tensor& x, const at::Tensor& alpha, const CodecConv& conv,
                             std::int64_t stride, at::Tensor& carry) {
    const at::Tensor frames =
        alpha.defined() ? snake_conv(x, alpha, conv, carry) : causal_conv(x, conv, carry);
    return interleave(frames, stride);
}

at::Tensor causal_strided_conv(const at::Tensor& x, const CodecConv& conv, std::int64_t stride) {
    const std::int64_t kernel = (conv.weight.size(2) - 1) * conv.dilation + 1;
    const std::int64_t left = kernel - stride;
    const std::int64_t length = x.size(2);
    // fish-speech's get_extra_padding_for_conv1d: pad the right up to whole strides.
    const std::int64_t frames = (length - kernel + left + stride - 1) / stride + 1;
    const std::int64_t right = (frames - 1) * stride + (kernel - left) - length;
    return at::conv1d(at::constant_pad_nd(x, {left, std::max<std::int64_t>(right, 0)}), conv.weight,
                      conv.bias, at::IntArrayRef(stride), at::IntArrayRef(0),
                      at::IntArrayRef(conv.dilation), conv.groups);
}

at::Tensor convnext(const at::Tensor& x, const CodecConvNeXt& block, at::Tensor& carry) {
    at::Tensor y = causal_conv(x, block.dwconv, carry).transpose(1, 2);  // [B, T, C]
    y = at::layer_norm(y, {y.size(2)}, block.norm_weight, block.norm_bias, 1e-6);
    y = at::gelu(at::linear(y, block.pw1_weight, block.pw1_bias));
    y = at::linear(y, block.pw2_weight, block.pw2_bias) * block.gamma;
    return x + y.transpose(1, 2);
}

at::Tensor residual_unit(const at::Tensor& x, const CodecResidualUnit& unit, at::Tensor& carry) {
    at::Tensor y = snake_conv(x, unit.alpha1, unit.conv1, carry);
    snake_into(y, unit.alpha2, y, 0, y.size(2));  // in place: y is this call's own
    return run_conv(y, unit.conv2).add_(x);
}

at::Tensor transformer(const at::Tensor& x, const CodecTransformer& module, std::int64_t first,
                       std::vector<at::Tensor>& keys, std::vector<at::Tensor>& values) {
    const std::int64_t batch = x.size(0), dim = x.size(1), frames = x.size(2);
    const std::int64_t heads = dim / kCodecHeadDim, d = kCodecHeadDim;
    at::Tensor h = x.transpose(1, 2).reshape({batch * frames, dim}).contiguous();
    const at::Tensor positions = at::arange(first, first + frames, at::kLong);
    qwen3::RotaryTables rope = fish_rotary_tables(positions, d, kCodecRopeTheta, x.device());
    if (batch > 1) {
        rope.cos = rope.cos.repeat({batch, 1});
        rope.sin = rope.sin.repeat({batch, 1});
    }
    keys.resize(module.layers.size());
    values.resize(module.layers.size());
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (std::size_t l = 0; l < module.layers.size(); ++l) {
        const CodecTransformerLayer& w = module.layers[l];
        const at::Tensor qkv =
            qwen3::project(qwen3::rms_norm(h, w.attention_norm, kCodecNormEps), w.wqkv);
        at::Tensor q = qkv.narrow(1, 0, dim).reshape({-1, heads, d}).contiguous();
        at::Tensor k = qkv.narrow(1, dim, dim).reshape({-1, heads, d}).contiguous();
        qwen3::apply_rotary(q, rope);
        qwen3::apply_rotary(k, rope);
        const at::Tensor v = qkv.narrow(1, 2 * dim, dim).reshape({batch, frames, heads, d});
        // [B, heads, past + frames, d]; the past is the window - 1 frames before `first`.
        at::Tensor all_keys = k.view({batch, frames, heads, d}).transpose(1, 2);
        at::Tensor all_values = v.transpose(1, 2);
        const std::int64_t past = keys[l].defined() ? keys[l].size(2) : 0;
        if (past > 0) {
            all_keys = at::cat({keys[l], all_keys}, 2);
            all_values = at::cat({values[l], all_values}, 2);
        }
        // Query i (position first + i) sees key j (position first - past + j) when
        // 0 <= (first + i) - (first - past + j) < window.
        const at::Tensor query_pos = at::arange(frames, at::kLong).unsqueeze(1) + past;
        const at::Tensor key_pos = at::arange(past + frames, at::kLong).unsqueeze(0);
        const at::Tensor distance = query_pos - key_pos;
        const at::Tensor blocked = ((distance < 0) | (distance >= module.window)).to(x.device());
        at::Tensor scores =
            at::matmul(q.view({batch, frames, heads, d}).transpose(1, 2), all_keys.transpose(2, 3))
                .mul_(scale);
        scores.masked_fill_(blocked, -INFINITY);
        const at::Tensor attended = at::matmul(at::softmax(scores, -1), all_values)
                                        .transpose(1, 2)
                                        .reshape({batch * frames, dim});
        h = h + qwen3::project(attended, w.wo) * w.attention_scale;
        const at::Tensor f = qwen3::rms_norm(h, w.ffn_norm, kCodecNormEps);
        h = h + qwen3::swiglu_mlp(f, w.gate_up, w.down) * w.ffn_scale;
        const std::int64_t keep = std::min(module.window - 1, past + frames);
        keys[l] = all_keys.narrow(2, past + frames - keep, keep).contiguous();
        values[l] = all_values.narrow(2, past + frames - keep, keep).contiguous();
    }
    h = qwen3::rms_norm(h, module.norm, kCodecNormEps);
    return h.view({batch, frames, dim}).transpose(1, 2);
}

}  // namespace omnirt::models::s2_pro::codec
