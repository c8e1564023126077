#include "models/qwen3/layers.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/cpu_linear.h"
#include "engine/cpu_vector.h"

namespace omnirt::models::qwen3 {
namespace {

// Up to this many rows, a float32 CPU linear runs one matrix-vector product per row (OpenBLAS'
// sgemm with a few rows is several times slower than the memory bound).
constexpr std::int64_t kMaxMatrixVectorRows = 4;

// y[n] = x . weight[n] for rows [begin, end) of a bfloat16 weight, x in float32, float32 sums.
OMNIRT_KERNEL_CLONES void bfloat16_matrix_vector(const float* x, const c10::BFloat16* weight,
                                                 std::int64_t in, std::int64_t begin,
                                                 std::int64_t end, float* y) {
    using engine::cpu::Float8;
    using engine::cpu::load8;
    for (std::int64_t n = begin; n < end; ++n) {
        const c10::BFloat16* row = weight + n * in;
        Float8 first = {};
        Float8 second = {};
        std::int64_t k = 0;
        for (; k + 16 <= in; k += 16) {
            first += load8(x + k) * load8(row + k);
            second += load8(x + k + 8) * load8(row + k + 8);
        }
        float sum = engine::cpu::horizontal_sum(first + second);
        for (; k < in; ++k) sum += x[k] * static_cast<float>(row[k]);
        y[n] = sum;
    }
}

bool cpu_kernel_dtype(at::ScalarType type) {
    return type == at::kFloat || type == at::kBFloat16 || type == at::kHalf;
}

// Rounds a float32 value through T (what an ATen operator producing T does).
template <class T>
inline float round_through(float value) {
    return static_cast<float>(static_cast<T>(value));
}

// One bfloat16 row of rms_norm_kernel on Float8 vectors: 16 partial sums of squares (lanes
// 0-7 and 8-15), added in lane order after the tail, then the normalized values rounded through
// bfloat16 and scaled, as the generic loop does (the AVX2 clone may fuse the squares'
// multiply-adds, so a sum can differ from the generic loop's in its last bit).
OMNIRT_KERNEL_CLONES void rms_norm_row_bf16(const c10::BFloat16* in, const c10::BFloat16* weight,
                                            std::int64_t width, float epsilon,
                                            c10::BFloat16* result) {
    using engine::cpu::Float8;
    using engine::cpu::load8;
    Float8 low = {};
    Float8 high = {};
    std::int64_t i = 0;
    for (; i + 16 <= width; i += 16) {
        const Float8 a = load8(in + i);
        const Float8 b = load8(in + i + 8);
        low += a * a;
        high += b * b;
    }
    float sum = 0.0f;
    for (; i < width; ++i) sum += static_cast<float>(in[i]) * static_cast<float>(in[i]);
    for (int lane = 0; lane < 8; ++lane) sum += low[lane];
    for (int lane = 0; lane < 8; ++lane) sum += high[lane];
    const float inverse_rms = 1.0f / std::sqrt(sum / static_cast<float>(width) + epsilon);
    const Float8 scale = Float8{} + inverse_rms;
    std::int64_t j = 0;
    for (; j + 8 <= width; j += 8) {
        engine::cpu::store8(result + j, engine::cpu::round_through_bfloat16(load8(in + j) * scale) *
                                            load8(weight + j));
    }
    for (; j < width; ++j) {
        const float normalized =
            round_through<c10::BFloat16>(static_cast<float>(in[j]) * inverse_rms);
        result[j] = static_cast<c10::BFloat16>(normalized * static_cast<float>(weight[j]));
    }
}

// Rotate-half RoPE of one bfloat16 head (dim = 2 * half) with its token's tables c and s
// (already rounded through bfloat16), eight dims at a time, rounding as the generic loop does.
OMNIRT_KERNEL_CLONES void rotary_head_bf16(c10::BFloat16* v, const float* c, const float* s,
                                           std::int64_t half) {
    using engine::cpu::Float8;
    using engine::cpu::load8;
    using engine::cpu::round_through_bfloat16;
    std::int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
        const Float8 first = load8(v + i);
        const Float8 second = load8(v + i + half);
        engine::cpu::store8(v + i, round_through_bfloat16(first * load8(c + i)) +
                                       round_through_bfloat16(-second * load8(s + i)));
        engine::cpu::store8(v + i + half, round_through_bfloat16(second * load8(c + i + half)) +
                                              round_through_bfloat16(first * load8(s + i + half)));
    }
    for (; i < half; ++i) {
        const float first = static_cast<float>(v[i]);
        const float second = static_cast<float>(v[i + half]);
        v[i] = static_cast<c10::BFloat16>(round_through<c10::BFloat16>(first * c[i]) +
                                          round_through<c10::BFloat16>(-second * s[i]));
        v[i + half] =
            static_cast<c10::BFloat16>(round_through<c10::BFloat16>(second * c[i + half]) +
                                       round_through<c10::BFloat16>(first * s[i + half]));
    }
}

template <class T>
void rms_norm_kernel(const at::Tensor& x, const at::Tensor& weight, double eps, at::Tensor& out) {
    const std::int64_t width = x.size(-1);
    // Rows addressed as [outer, inner] with their strides (a 2-D x has inner == 1).
    const std::int64_t outer = x.size(0);
    const std::int64_t inner = x.dim() == 3 ? x.size(1) : 1;
    const std::int64_t outer_stride = x.stride(0);
    const std::int64_t inner_stride = x.dim() == 3 ? x.stride(1) : 0;
    const T* x_data = x.data_ptr<T>();
    const T* w = weight.data_ptr<T>();
    T* out_data = out.data_ptr<T>();
    const float epsilon = static_cast<float>(eps);
    at::parallel_for(0, outer * inner, 64, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row = begin; row < end; ++row) {
            const T* in = x_data + (row / inner) * outer_stride + (row % inner) * inner_stride;
            T* result = out_data + row * width;
            if constexpr (std::is_same_v<T, c10::BFloat16>) {
                rms_norm_row_bf16(in, w, width, epsilon, result);
                continue;
            }
            constexpr int kLanes = 16;
            float partial[kLanes] = {};
            std::int64_t i = 0;
            for (; i + kLanes <= width; i += kLanes) {
                for (int lane = 0; lane < kLanes; ++lane) {
                    const float v = static_cast<float>(in[i + lane]);
                    partial[lane] += v * v;
                }
            }
            float sum = 0.0f;
            for (; i < width; ++i) sum += static_cast<float>(in[i]) * static_cast<float>(in[i]);
            for (int lane = 0; lane < kLanes; ++lane) sum += partial[lane];
            const float inverse_rms = 1.0f / std::sqrt(sum / static_cast<float>(width) + epsilon);
            for (std::int64_t j = 0; j < width; ++j) {
                const float normalized = round_through<T>(static_cast<float>(in[j]) * inverse_rms);
                result[j] = static_cast<T>(normalized * static_cast<float>(w[j]));
            }
        }
    });
}

template <class T>
void rotary_kernel(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const std::int64_t tokens = x.size(0);
    const std::int64_t heads = x.size(1);
    const std::int64_t dim = x.size(2);
    const std::int64_t half = dim / 2;
    T* data = x.data_ptr<T>();
    const float* cos_data = cos.data_ptr<float>();
    const float* sin_data = sin.data_ptr<float>();
    at::parallel_for(0, tokens, 16, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> c(static_cast<std::size_t>(dim));
        std::vector<float> s(static_cast<std::size_t>(dim));
        for (std::int64_t token = begin; token < end; ++token) {
            // transformers casts the tables to the activation dtype first.
            for (std::int64_t i = 0; i < dim; ++i) {
                c[static_cast<std::size_t>(i)] = round_through<T>(cos_data[token * dim + i]);
                s[static_cast<std::size_t>(i)] = round_through<T>(sin_data[token * dim + i]);
            }
            for (std::int64_t head = 0; head < heads; ++head) {
                T* v = data + (token * heads + head) * dim;
                if constexpr (std::is_same_v<T, c10::BFloat16>) {
                    rotary_head_bf16(v, c.data(), s.data(), half);
                    continue;
                }
                for (std::int64_t i = 0; i < half; ++i) {
                    const float first = static_cast<float>(v[i]);
                    const float second = static_cast<float>(v[i + half]);
                    const auto lo = static_cast<std::size_t>(i);
                    const auto hi = static_cast<std::size_t>(i + half);
                    v[i] = static_cast<T>(round_through<T>(first * c[lo]) +
                                          round_through<T>(-second * s[lo]));
                    v[i + half] = static_cast<T>(round_through<T>(second * c[hi]) +
                                                 round_through<T>(first * s[hi]));
                }
            }
        }
    });
}

}  // namespace

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                   const engine::cpu::PackedWeight* packed) {
    // Decode rows and float32 prefill rows, and one bfloat16 row: one pass over the weight
    // (engine/cpu_linear.h), where the CPU has the instructions. One float32 row of an unpacked
    // weight takes BLAS' mv below: the streaming kernel was 1.5x faster on the matrices alone,
    // but inside a decode step no faster (alternating runs, docs/benchmarks.md "Fifth look at
    // batch 1"); a packed one (bfloat16 values) reads 1.5 bytes a weight instead of 4.
    if (x.dim() == 2 && (x.size(0) > 1 || x.scalar_type() == at::kBFloat16 || packed != nullptr)) {
        at::Tensor out = engine::cpu::small_batch_linear(
            x, weight, bias, engine::cpu::LinearKernel::fastest, packed);
        if (out.defined()) return out;
    }
    if (x.dim() == 2 && x.size(0) <= kMaxMatrixVectorRows && x.device().is_cpu() &&
        x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat) {
        at::Tensor out = at::empty({x.size(0), weight.size(0)}, x.options());
        for (std::int64_t row = 0; row < x.size(0); ++row) {
            at::Tensor out_row = out[row];
            at::mv_out(out_row, weight, x[row]);
        }
        if (bias.defined()) out.add_(bias);
        return out;
    }
    if (x.dim() == 2 && x.size(0) == 1 && x.device().is_cpu() && x.scalar_type() == at::kBFloat16 &&
        weight.scalar_type() == at::kBFloat16 && weight.is_contiguous()) {
        // oneDNN's bfloat16 path reads a large weight at about half the memory bandwidth.
        const at::Tensor x32 = x.to(at::kFloat).contiguous();
        at::Tensor out = at::empty({1, weight.size(0)}, x32.options());
        const float* x_data = x32.data_ptr<float>();
        const c10::BFloat16* w_data = weight.data_ptr<c10::BFloat16>();
        float* out_data = out.data_ptr<float>();
        const std::int64_t in = weight.size(1);
        at::parallel_for(0, weight.size(0), 256, [&](std::int64_t begin, std::int64_t end) {
            bfloat16_matrix_vector(x_data, w_data, in, begin, end, out_data);
        });
        if (bias.defined()) out.add_(bias.to(at::kFloat));
        return out.to(at::kBFloat16);
    }
    return at::linear(x, weight, bias);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    const at::ScalarType type = x.scalar_type();
    if (x.device().is_cpu() && cpu_kernel_dtype(type) && weight.scalar_type() == type &&
        (x.dim() == 2 || x.dim() == 3) && x.stride(-1) == 1 && weight.is_contiguous()) {
        at::Tensor out = at::empty(x.sizes(), x.options());
        switch (type) {
            case at::kFloat:
                rms_norm_kernel<float>(x, weight, eps, out);
                break;
            case at::kBFloat16:
                rms_norm_kernel<c10::BFloat16>(x, weight, eps, out);
                break;
            default:
                rms_norm_kernel<c10::Half>(x, weight, eps, out);
                break;
        }
        return out;
    }
    const at::Tensor x32 = x.to(at::kFloat);
    const at::Tensor variance = x32.pow(2).mean(-1, /*keepdim=*/true);
    return weight * (x32 * at::rsqrt(variance + eps)).to(type);
}

void apply_rotary(at::Tensor& x, const RotaryTables& tables) {
    const at::ScalarType type = x.scalar_type();
    if (x.device().is_cpu() && cpu_kernel_dtype(type) && x.is_contiguous() &&
        tables.cos.is_contiguous() && tables.sin.is_contiguous() &&
        tables.cos.scalar_type() == at::kFloat && tables.sin.scalar_type() == at::kFloat) {
        switch (type) {
            case at::kFloat:
                rotary_kernel<float>(x, tables.cos, tables.sin);
                break;
            case at::kBFloat16:
                rotary_kernel<c10::BFloat16>(x, tables.cos, tables.sin);
                break;
            default:
                rotary_kernel<c10::Half>(x, tables.cos, tables.sin);
                break;
        }
        return;
    }
    const std::int64_t half = x.size(-1) / 2;
    const at::Tensor cos = tables.cos.to(type).unsqueeze(1);
    const at::Tensor sin = tables.sin.to(type).unsqueeze(1);
    const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    x.copy_(x * cos + rotated * sin);
}

at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                      const engine::cpu::PackedWeight* gate_up_packed,
                      const engine::cpu::PackedWeight* down_packed) {
    const at::Tensor projected = project(x, gate_up, {}, gate_up_packed);
    const std::int64_t intermediate = projected.size(1) / 2;
    at::Tensor activated = at::silu(projected.narrow(1, 0, intermediate));
    activated.mul_(projected.narrow(1, intermediate, intermediate));
    return project(activated, down, {}, down_packed);
}

ExpertRouting route_tokens(const at::Tensor& x, const at::Tensor& router, int top_k,
                           bool norm_topk_prob) {
    const at::Tensor probabilities = at::softmax(project(x, router), 1, at::kFloat);
    auto [weights, experts] = probabilities.topk(top_k, -1);
    if (norm_topk_prob) weights = weights / weights.sum(-1, /*keepdim=*/true);
    return {.weights = weights.to(x.scalar_type()), .experts = experts};
}

at::Tensor moe_mlp(const at::Tensor& x, const at::Tensor& router,
                   const std::vector<at::Tensor>& expert_gate_up,
                   const std::vector<at::Tensor>& expert_down, int top_k, bool norm_topk_prob) {
    const std::int64_t tokens = x.size(0);
    const auto num_experts = static_cast<std::int64_t>(expert_gate_up.size());
    const ExpertRouting routing = route_tokens(x, router, top_k, norm_topk_prob);
    // Each token's choices in expert order, flattened token-major: [tokens * top_k].
    auto [experts, rank] = routing.experts.sort(/*dim=*/1);
    const at::Tensor flat_experts = experts.reshape({-1});
    const at::Tensor flat_weights = routing.weights.gather(1, rank).reshape({-1});
    // The choices grouped by expert (a stable sort keeps each group's tokens in order), on the
    // device: one gather of the routed rows, and the group sizes are the only values the host
    // reads (one synchronisation per layer on a GPU).
    const at::Tensor order = std::get<1>(
        flat_experts.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0, /*descending=*/false));
    const at::Tensor routed_x = x.index_select(0, at::floor_divide(order, top_k));
    const at::Tensor routed_weights = flat_weights.index_select(0, order).unsqueeze(1);
    const at::Tensor counts = flat_experts.bincount({}, num_experts).to(at::kCPU);
    const std::int64_t* count_data = counts.data_ptr<std::int64_t>();
    std::vector<at::Tensor> outputs;
    std::int64_t offset = 0;
    for (std::int64_t expert = 0; expert < num_experts; ++expert) {
        const std::int64_t count = count_data[expert];
        if (count == 0) continue;
        const auto e = static_cast<std::size_t>(expert);
        outputs.push_back(
            swiglu_mlp(routed_x.narrow(0, offset, count), expert_gate_up[e], expert_down[e])
                .mul_(routed_weights.narrow(0, offset, count)));
        offset += count;
    }
    // Back to token-major order (every row written once), then each token's experts summed in
    // expert index order, as transformers accumulates them: the same additions, in the same
    // order and dtype, as one expert at a time.
    at::Tensor per_choice = at::empty({tokens * top_k, x.size(1)}, x.options());
    per_choice.index_copy_(0, order, at::cat(outputs));
    const at::Tensor choices = per_choice.view({tokens, top_k, x.size(1)});
    at::Tensor out = at::zeros_like(x);
    for (std::int64_t k = 0; k < top_k; ++k) out.add_(choices.select(1, k));
    return out;
}

}  // namespace omnirt::models::qwen3
