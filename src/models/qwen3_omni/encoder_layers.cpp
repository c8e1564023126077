#include "models/qwen3_omni/encoder_layers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "torch_bridge/torch_errors.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

std::string shape_string(at::IntArrayRef shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ", ";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

// Score matrices of at most this many elements per matmul (64 MiB of float32): a 4096-patch
// image attends in query blocks instead of one [heads, 4096, 4096] matrix.
constexpr std::int64_t kMaxScoreElements = std::int64_t{1} << 24;

// transformers' eager attention: scores = q k^T * scale in the compute dtype, softmax in float32
// cast back, times v. q/k/v/result [segments, heads, length, d]; result is written in place.
void attend_run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                at::Tensor& result) {
    const std::int64_t segments = q.size(0);
    const std::int64_t heads = q.size(1);
    const std::int64_t length = q.size(2);
    const std::int64_t per_segment = heads * length * length;
    if (per_segment <= kMaxScoreElements) {
        const std::int64_t step = std::max<std::int64_t>(1, kMaxScoreElements / per_segment);
        for (std::int64_t first = 0; first < segments; first += step) {
            const std::int64_t count = std::min(step, segments - first);
            const at::Tensor qs = q.narrow(0, first, count);
            const at::Tensor ks = k.narrow(0, first, count);
            const at::Tensor vs = v.narrow(0, first, count);
            const at::Tensor scores = at::matmul(qs, ks.transpose(-2, -1)) * scale;
            const at::Tensor probabilities = scores.softmax(-1, at::kFloat).to(q.scalar_type());
            result.narrow(0, first, count).copy_(at::matmul(probabilities, vs));
        }
        return;
    }
    // One segment at a time, its queries in blocks.
    const std::int64_t block = std::max<std::int64_t>(1, kMaxScoreElements / (heads * length));
    for (std::int64_t segment = 0; segment < segments; ++segment) {
        const at::Tensor ks = k[segment];
        const at::Tensor vs = v[segment];
        for (std::int64_t row = 0; row < length; row += block) {
            const std::int64_t count = std::min(block, length - row);
            const at::Tensor qs = q[segment].narrow(1, row, count);
            const at::Tensor scores = at::matmul(qs, ks.transpose(-2, -1)) * scale;
            const at::Tensor probabilities = scores.softmax(-1, at::kFloat).to(q.scalar_type());
            result[segment].narrow(1, row, count).copy_(at::matmul(probabilities, vs));
        }
    }
}

}  // namespace

Status check_encoder_dtype(const std::string& what, at::ScalarType dtype,
                           const at::Device& device) {
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
        return fail(ErrorCode::invalid_argument,
                    what + ": the dtype must be float32, bfloat16 or float16, not " +
                        std::string(c10::toString(dtype)));
    }
    if (dtype == at::kHalf && device.is_cpu()) {
        return fail(ErrorCode::unimplemented,
                    what + ": float16 runs on CUDA only; use bfloat16 or float32 on the CPU");
    }
    return ok_status();
}

Result<at::Tensor> EncoderWeightReader::get(const std::string& name,
                                            const std::vector<std::int64_t>& expected,
                                            const std::string& meaning) const {
    const std::string full_name = prefix_ + name;
    auto tensor = lookup_(full_name);
    if (!tensor.has_value()) return fail(tensor.error().with_context("weight '" + full_name + "'"));
    const DType dtype = tensor->dtype();
    if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::f64) {
        return fail(ErrorCode::invalid_argument,
                    "weight '" + full_name + "' has a non-floating dtype");
    }
    const at::Tensor source = torch_bridge::to_torch(*tensor);
    if (source.sizes() != at::IntArrayRef(expected)) {
        return fail(ErrorCode::invalid_argument, "weight '" + full_name + "' has shape " +
                                                     shape_string(source.sizes()) + ", expected " +
                                                     shape_string(expected) + " (" + meaning + ")");
    }
    try {
        return source.to(device_, dtype_).contiguous();
    } catch (const std::exception&) {
        return fail(ErrorCode::resource_exhausted,
                    "weight '" + full_name +
                        "': cannot convert it: " + torch_bridge::current_exception_text());
    }
}

Result<LinearWeights> read_linear(const EncoderWeightReader& reader, const std::string& name,
                                  std::int64_t out, std::int64_t in, const std::string& meaning,
                                  bool bias) {
    LinearWeights layer;
    OMNI_TRY(layer.weight, reader.get(name + ".weight", {out, in}, meaning));
    if (bias) {
        const std::string out_meaning = meaning.substr(0, meaning.find(','));
        OMNI_TRY(layer.bias, reader.get(name + ".bias", {out}, out_meaning));
    }
    return layer;
}

Result<LayerNormWeights> read_layer_norm(const EncoderWeightReader& reader, const std::string& name,
                                         std::int64_t width, const std::string& meaning) {
    LayerNormWeights norm;
    OMNI_TRY(norm.weight, reader.get(name + ".weight", {width}, meaning));
    OMNI_TRY(norm.bias, reader.get(name + ".bias", {width}, meaning));
    return norm;
}

at::Tensor linear(const at::Tensor& x, const LinearWeights& layer) {
    return at::linear(x, layer.weight, layer.bias);
}

at::Tensor layer_norm(const at::Tensor& x, const LayerNormWeights& norm, double eps) {
    return at::layer_norm(x, {norm.weight.size(0)}, norm.weight, norm.bias, eps);
}

at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::vector<std::int64_t>& lengths, double scale) {
    const std::int64_t tokens = q.size(0);
    const std::int64_t heads = q.size(1);
    const std::int64_t head_dim = q.size(2);
    at::Tensor output = at::empty({tokens, heads, head_dim}, q.options());
    std::int64_t start = 0;
    std::size_t index = 0;
    while (index < lengths.size()) {
        const std::int64_t length = lengths[index];
        std::size_t end = index;
        while (end < lengths.size() && lengths[end] == length) ++end;
        const auto segments = static_cast<std::int64_t>(end - index);
        const std::int64_t rows = segments * length;
        if (length > 0) {
            // [segments, length, heads, d] -> [segments, heads, length, d].
            auto batched = [&](const at::Tensor& x) {
                return x.narrow(0, start, rows)
                    .reshape({segments, length, heads, head_dim})
                    .transpose(1, 2);
            };
            at::Tensor result = output.narrow(0, start, rows)
                                    .view({segments, length, heads, head_dim})
                                    .transpose(1, 2);
            attend_run(batched(q), batched(k), batched(v), scale, result);
        }
        start += rows;
        index = end;
    }
    return output.view({tokens, heads * head_dim});
}

}  // namespace omnirt::models::qwen3_omni
