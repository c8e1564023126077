#pragma once
// The building blocks of the Qwen3 forward pass, as functions over at::Tensors. Each follows the
// math of transformers' modeling_qwen3 / modeling_qwen3_moe; where a CPU kernel replaces a chain
// of ATen operators (rms_norm, apply_rotary) it computes the same values with float32
// arithmetic inside, and the ATen chain still serves other devices.
//
// Thread safety: pure functions (apply_rotary writes only its argument); any thread.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "engine/cpu_packed_weight.h"
#include "models/qwen3/rotary_embedding.h"

namespace omnirt::models::qwen3 {

// x [tokens, in] times weight [out, in] transposed, plus bias [out] when defined: [tokens, out].
// On the CPU, 2 to 64 rows and one bfloat16 row run engine::cpu::small_batch_linear (the
// weight read once; AVX512-BF16 / AVX-512F), one row of float32 a BLAS matrix-vector product
// (the matrix-matrix paths of OpenBLAS and oneDNN read the weight well below the memory
// bandwidth there). Without the instructions, up to 4 float32 rows take one BLAS
// matrix-vector product each and one bfloat16 row a vectorized GEMV with float32 sums.
// `packed` (weight's engine::cpu::PackedWeight, or null): one to four bfloat16 rows read it
// instead (the same bits, 3/4 of the bytes).
[[nodiscard]] at::Tensor project(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias = {},
                                 const engine::cpu::PackedWeight* packed = nullptr);

// RMSNorm over the last dimension: float32 x * rsqrt(mean(x^2) + eps), cast back to x's dtype,
// times weight. x may be a strided view (rows of a fused projection); the result is contiguous.
[[nodiscard]] at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// In place, rotate-half RoPE on x [tokens, heads, head_dim] (contiguous) with the tables' rows
// (one per token): x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1].
void apply_rotary(at::Tensor& x, const RotaryTables& tables);

// SwiGLU MLP with fused gate/up rows: down(silu(gate(x)) * up(x)), gate_up [2 * I, hidden] (gate
// rows first), down [hidden, I]; their packed copies as project() takes them.
[[nodiscard]] at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate_up,
                                    const at::Tensor& down,
                                    const engine::cpu::PackedWeight* gate_up_packed = nullptr,
                                    const engine::cpu::PackedWeight* down_packed = nullptr);

// Qwen3-MoE routing of tokens x [tokens, hidden]: router logits x * router^T, softmax in float32,
// top-k (largest first), renormalized to sum 1 when norm_topk_prob, cast to x's dtype.
struct ExpertRouting {
    at::Tensor weights;  // [tokens, top_k], x's dtype
    at::Tensor experts;  // [tokens, top_k] int64
};
[[nodiscard]] ExpertRouting route_tokens(const at::Tensor& x, const at::Tensor& router, int top_k,
                                         bool norm_topk_prob);

// The sparse MoE block: sum over a token's routed experts of weight * swiglu_mlp(expert), each
// expert run once on all the tokens routed to it. expert_gate_up / expert_down hold one fused
// SwiGLU per expert (see swiglu_mlp).
[[nodiscard]] at::Tensor moe_mlp(const at::Tensor& x, const at::Tensor& router,
                                 const std::vector<at::Tensor>& expert_gate_up,
                                 const std::vector<at::Tensor>& expert_down, int top_k,
                                 bool norm_topk_prob);

}  // namespace omnirt::models::qwen3
