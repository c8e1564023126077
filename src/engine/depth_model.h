#pragma once
// DepthModel: the in-engine depth decoder of the FeedbackAR pattern (pipeline.md,
// "FeedbackARModelRunner"). After every step of the main model, a second small autoregressive
// model generates the remaining codes of the frame the main model's token started (Qwen3-Omni:
// the code predictor's 15 residual codebooks; S2-Pro: the fast AR's codebooks), batched over every
// sequence that produced a token in the step. The engine samples each code with the request's
// sampling parameters for that depth; the role then turns the frame into the main model's next
// input embedding (ArRole::feedback). No cross-stage hop per frame.
//
// A frame runs begin_frame() once, then next() for depth 1 .. num_codes() - 1, then end_frame().
// The model keeps its scratch KV for the frame's rows itself (it lives for one frame: nothing is
// carried from one frame to the next), so the main model's paged cache is not involved.
// Row r of every call is the same sequence throughout a frame.
//
// Thread safety: driven by the engine thread only, like ModelRunner::forward().
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>

#include "core/error.h"

namespace omnirt::engine {

class DepthModel {
  public:
    virtual ~DepthModel() = default;
    // Codes generated per frame after the main model's token (at least 1).
    [[nodiscard]] virtual int num_codes() const = 0;
    // Width of the logits of depth `depth` (0-based, < num_codes()).
    [[nodiscard]] virtual std::int64_t vocab_size(int depth) const = 0;
    // Starts a frame: `hidden` [rows, hidden] is the main model's final hidden state of the
    // token (ForwardOutput::hidden), `tokens` the tokens the main model sampled. Returns the
    // logits of depth 0, [rows, vocab_size(0)].
    [[nodiscard]] virtual Result<at::Tensor> begin_frame(const at::Tensor& hidden,
                                                         std::span<const std::int32_t> tokens) = 0;
    // Feeds the codes chosen at depth - 1 (one per row) and returns the logits of `depth`.
    [[nodiscard]] virtual Result<at::Tensor> next(int depth,
                                                  std::span<const std::int32_t> previous) = 0;
    // Frees the frame's scratch (also after an error).
    virtual void end_frame() {}
};

}  // namespace omnirt::engine
