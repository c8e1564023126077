// ArScheduler: the depth model's frame for the sequences of a step (depth_model.h). Engine
// thread only.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <vector>

#include "engine/ar_scheduler.h"
#include "engine/sampling.h"

namespace omnirt::engine {
namespace {

// Ends the frame whatever happens in between.
class FrameScope {
  public:
    explicit FrameScope(DepthModel& model) : model_(model) {}
    FrameScope(const FrameScope&) = delete;
    FrameScope& operator=(const FrameScope&) = delete;
    ~FrameScope() { model_.end_frame(); }

  private:
    DepthModel& model_;
};

}  // namespace

Result<std::vector<std::vector<std::int32_t>>> ArScheduler::run_depth(
    std::span<ArSequence* const> sequences, const at::Tensor& hidden,
    std::span<const std::int32_t> tokens) {
    const int depths = depth_->num_codes();
    const auto rows = static_cast<std::int64_t>(sequences.size());
    std::vector<std::vector<std::int32_t>> frames(sequences.size());
    for (std::size_t r = 0; r < sequences.size(); ++r) {
        frames[r].reserve(static_cast<std::size_t>(depths) + 1);
        frames[r].push_back(tokens[r]);
    }
    try {
        FrameScope scope(*depth_);
        OMNI_TRY(at::Tensor logits, depth_->begin_frame(hidden, tokens));
        std::vector<std::int32_t> codes(sequences.size());
        for (int d = 0; d < depths; ++d) {
            if (!logits.defined() || logits.dim() != 2 || logits.size(0) != rows ||
                logits.size(1) != depth_->vocab_size(d)) {
                return fail(ErrorCode::internal,
                            "the depth model returned logits of shape " +
                                (logits.defined() ? c10::str(logits.sizes()) : "undefined") +
                                " at depth " + std::to_string(d) + " for " + std::to_string(rows) +
                                " rows and " + std::to_string(depth_->vocab_size(d)) + " codes");
            }
            std::vector<SamplerRow> sampler_rows;
            sampler_rows.reserve(sequences.size());
            for (ArSequence* sequence : sequences) {
                sampler_rows.push_back(
                    SamplerRow{.state = &sequence->depth_sampling_[static_cast<std::size_t>(d)]});
            }
            OMNI_TRY(std::vector<SampledToken> sampled, Sampler::sample(logits, sampler_rows));
            for (std::size_t r = 0; r < sequences.size(); ++r) {
                codes[r] = sampled[r].token;
                frames[r].push_back(sampled[r].token);
            }
            if (d + 1 < depths) {
                OMNI_TRY(logits, depth_->next(d + 1, codes));
            }
        }
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal, error.what_without_backtrace());
    } catch (const std::exception& error) {
        return fail(ErrorCode::internal, std::string("threw: ") + error.what());
    }
    return frames;
}

}  // namespace omnirt::engine
