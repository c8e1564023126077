#pragma once
// Qwen3-Omni's talker (qwen3-omni.md §5): its decoder as a Qwen3Model over `talker.model.*` (MoE
// with a shared expert, interleaved M-RoPE, codec_embedding as the input table and codec_head as
// the head), the code predictor as its depth model, and what turns the thinker's outputs into
// talker inputs:
//   text_projection   ResizeMLP on thinker input embeddings (text tokens, tts_* tokens)
//   hidden_projection ResizeMLP on thinker hidden states at accept_hidden_layer (media rows)
// The thinker's embedding table (`thinker.model.embed_tokens.weight`) is read row by row from the
// checkpoint (a view of its mapping: only the rows a request uses are touched), so the talker
// stage needs no thinker in its process.
//
// Thread safety: immutable after load; the projections may run on any thread.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <span>

#include "core/error.h"
#include "models/qwen3/qwen3_model.h"
#include "models/qwen3_omni/code_predictor.h"
#include "models/qwen3_omni/omni_config.h"
#include "models/qwen3_omni/talker_config.h"

namespace omnirt::models::qwen3_omni {

struct ResizeMlp {
    at::Tensor fc1_weight, fc1_bias, fc2_weight, fc2_bias;
};

// The thinker-to-talker half of the talker: projections, the thinker's embedding rows and the
// projected tts_pad / tts_bos / tts_eos rows (computed once).
class TalkerInputs {
  public:
    // text_projection(thinker embed_tokens[ids]) [ids, talker hidden] in the model dtype.
    // invalid_argument for ids outside the thinker vocabulary.
    [[nodiscard]] Result<at::Tensor> project_tokens(std::span<const std::int32_t> ids) const;
    // hidden_projection(rows) for thinker hidden states [n, thinker hidden].
    [[nodiscard]] at::Tensor project_hidden(const at::Tensor& rows) const;
    [[nodiscard]] const at::Tensor& tts_pad() const { return tts_pad_; }  // [talker hidden]
    [[nodiscard]] const at::Tensor& tts_bos() const { return tts_bos_; }
    [[nodiscard]] const at::Tensor& tts_eos() const { return tts_eos_; }
    [[nodiscard]] at::ScalarType dtype() const { return dtype_; }
    [[nodiscard]] at::Device device() const { return device_; }

    [[nodiscard]] static Result<std::shared_ptr<TalkerInputs>> load(
        const TalkerConfig& config, std::int64_t thinker_vocab, const qwen3::WeightLookup& lookup,
        at::ScalarType dtype, at::Device device);

  private:
    TalkerInputs() = default;
    [[nodiscard]] at::Tensor resize(const ResizeMlp& mlp, const at::Tensor& x) const;

    ResizeMlp text_, hidden_;
    at::Tensor thinker_embed_;  // [thinker vocab, thinker hidden], as stored (a mapped view)
    at::Tensor tts_pad_, tts_bos_, tts_eos_;
    at::ScalarType dtype_ = at::kFloat;
    at::Device device_ = at::kCPU;
};

struct Talker {
    std::unique_ptr<qwen3::Qwen3Model> model;  // talker.model.* + codec_head
    std::unique_ptr<CodePredictor> predictor;
    std::shared_ptr<TalkerInputs> inputs;
};

// Loads the talker of a Qwen3-Omni checkpoint. `options.weight_prefix`, the embedding and head
// names and the rotary embedding are set here.
[[nodiscard]] Result<Talker> load_talker(const OmniConfig& omni, const TalkerConfig& config,
                                         const qwen3::WeightLookup& lookup,
                                         qwen3::Qwen3ModelOptions options = {});

}  // namespace omnirt::models::qwen3_omni
