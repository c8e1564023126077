#pragma once
// TalkerRole: the ArRole of Qwen3-Omni's talker (qwen3-omni.md §5.4-5.5). The talker's request
// arrives from mm_aggregate (qwen3_omni.project_to_talker: the thinker prompt's ids and 3-D
// positions) while the thinker generates; the thinker's stream brings, per text token,
// `token_id` and `stop`, and with its first token `talker_hidden` f32 [n, thinker hidden] (its
// hidden states at accept_hidden_layer over prompt rows [talker_hidden_begin, + n), which holds
// every media placeholder row).
//
//   open_request   the prefill plan (talker_config.h): prompt = user rows + 9 rows, all ids
//                  codec_pad (every prompt row gets an embedding), 3-D positions and offset; the
//                  speaker from the request's voice (unknown: invalid_argument); the prefix cache
//                  off (the prompt's embeddings are set in prepare_step); the code predictor
//                  greedy when the talker's own temperature is 0, else top-k 50 / top-p 0.8
//   ready          a step that makes frame s needs the text token trailing[s] (g_{s+1}) or the
//                  end of the thinker's text, so the prefill waits for g0 and g1 (or the end)
//   prepare_step   the prefill rows' embeddings (built once, kept for recomputes): user rows =
//                  text_projection(thinker embedding) or hidden_projection(thinker hidden) at
//                  media rows; then the 9 assistant rows of §5.4
//   feedback       codec sum of the frame (code predictor) + trailing[s]: text_projection of
//                  g_{s+1} while the thinker's text lasts, then tts_eos once, then tts_pad
//   suppressed     [vocab - 1024, vocab) except the codec EOS
//
// The thinker's stop token is never fed to the talker (as transformers never feeds the last
// generated token back). The frames leave as the engine's chunks (`codes` [16]) to code2wav.
//
// Thread safety: engine thread only (ArRole).
#include <memory>

#include "engine/ar_role.h"
#include "models/qwen3_omni/code_predictor.h"
#include "models/qwen3_omni/talker_config.h"
#include "models/qwen3_omni/talker_model.h"

namespace omnirt::models::qwen3_omni {

struct TalkerRoleOptions {
    std::string stage_name = "talker";  // reads params.stage_sampling.<stage_name>
    engine::SamplingParams default_sampling;
};

class TalkerRole final : public engine::ArRole {
  public:
    // `predictor` is the engine's depth model (it outlives the role's use of it).
    TalkerRole(TalkerConfig config, std::shared_ptr<TalkerInputs> inputs,
               const CodePredictor* predictor, TalkerRoleOptions options);

    [[nodiscard]] Result<engine::RequestSetup> open_request(const StagePayload& payload) override;
    [[nodiscard]] bool ready(const engine::ArSequence& sequence) override;
    [[nodiscard]] Status prepare_step(engine::ArSequence& sequence,
                                      engine::SequenceInput& input) override;
    [[nodiscard]] std::span<const std::int32_t> suppressed_tokens(
        const engine::ArSequence& sequence) override;
    [[nodiscard]] Result<at::Tensor> feedback(engine::ArSequence& sequence,
                                              const engine::TokenStep& step) override;

  private:
    TalkerConfig config_;
    std::shared_ptr<TalkerInputs> inputs_;
    const CodePredictor* predictor_;
    TalkerRoleOptions options_;
    std::vector<std::int32_t> suppressed_;
};

}  // namespace omnirt::models::qwen3_omni
