#pragma once
// S2ProRole: the ArRole of S2-Pro's slow AR (fact sheet sections 3.4, 4.3, 4.5, 6.1).
//
//   open_request  data.input_ids (the prompt, prompt.h), data.vq_positions (int [n]: prompt
//                 positions of reference frames, ascending) and data.vq_codes (int [n,
//                 num_codebooks]): each run of consecutive reference positions gets the frame
//                 embedding (FrameEmbedder) instead of its token embedding; the engine hashes
//                 those values into the prefix-cache keys, so two references with the same
//                 semantic ids but other residual codes never share KV blocks
//   suppressed    nothing: the slow AR's head (load_s2_pro_model) computes only the semantic
//                 ids and <|im_end|>, every other logit is -inf (the section 4.5 constraint), so
//                 no step spends time banning the other ~151,700 ids
//   feedback      the frame embedding of the sampled semantic token and its codes c_0..c_9 (the
//                 fast AR's, depth model) at the next position
// The result is the engine's default: output_ids and codes [frames, 1 + num_codebooks] (token,
// c_0..c_9; the <|im_end|> step makes no frame, as fish-speech drops it).
//
// Thread safety: engine thread only (ArRole).
#include <memory>
#include <vector>

#include "engine/ar_role.h"
#include "models/s2_pro/s2_pro_model.h"

namespace omnirt::models::s2_pro {

class S2ProRole final : public engine::ArRole {
  public:
    explicit S2ProRole(std::shared_ptr<const FrameEmbedder> embedder);

    // Errors (invalid_argument, naming the field): malformed input_ids; vq_positions outside the
    // prompt, not ascending, or at a non-semantic id; vq_codes of another shape or with codes
    // outside [0, codebook_size).
    [[nodiscard]] Result<engine::RequestSetup> open_request(const StagePayload& payload) override;
    [[nodiscard]] Result<at::Tensor> feedback(engine::ArSequence& sequence,
                                              const engine::TokenStep& step) override;

  private:
    std::shared_ptr<const FrameEmbedder> embedder_;
};

}  // namespace omnirt::models::s2_pro
