#include "models/qwen3_omni/talker_model.h"

#include <ATen/ATen.h>

#include <utility>

#include "models/qwen3/layers.h"
#include "models/qwen3_omni/encoder_layers.h"
#include "models/qwen3_omni/thinker_model.h"
#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::qwen3_omni {
namespace {

Result<ResizeMlp> read_resize(const EncoderWeightReader& reader, const std::string& name,
                              std::int64_t in, std::int64_t inner, std::int64_t out) {
    ResizeMlp mlp;
    OMNI_TRY(mlp.fc1_weight, reader.get(name + ".linear_fc1.weight", {inner, in},
                                        "intermediate_size, thinker_hidden_size"));
    OMNI_TRY(mlp.fc1_bias, reader.get(name + ".linear_fc1.bias", {inner}, "intermediate_size"));
    OMNI_TRY(mlp.fc2_weight, reader.get(name + ".linear_fc2.weight", {out, inner},
                                        "hidden_size, intermediate_size"));
    OMNI_TRY(mlp.fc2_bias, reader.get(name + ".linear_fc2.bias", {out}, "hidden_size"));
    return mlp;
}

}  // namespace

at::Tensor TalkerInputs::resize(const ResizeMlp& mlp, const at::Tensor& x) const {
    const at::Tensor inner = qwen3::project(x.to(device_, dtype_), mlp.fc1_weight, mlp.fc1_bias);
    return qwen3::project(at::silu(inner), mlp.fc2_weight, mlp.fc2_bias);
}

Result<at::Tensor> TalkerInputs::project_tokens(std::span<const std::int32_t> ids) const {
    const std::int64_t vocab = thinker_embed_.size(0);
    std::vector<std::int64_t> index;
    index.reserve(ids.size());
    for (std::int32_t id : ids) {
        if (id < 0 || id >= vocab) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3-Omni talker: thinker token " + std::to_string(id) +
                            " is outside the thinker's vocabulary of " + std::to_string(vocab));
        }
        index.push_back(id);
    }
    const at::Tensor rows = thinker_embed_.index_select(0, at::tensor(index, at::kLong));
    return resize(text_, rows);
}

at::Tensor TalkerInputs::project_hidden(const at::Tensor& rows) const {
    return resize(hidden_, rows);
}

Result<std::shared_ptr<TalkerInputs>> TalkerInputs::load(const TalkerConfig& config,
                                                         std::int64_t thinker_vocab,
                                                         const qwen3::WeightLookup& lookup,
                                                         at::ScalarType dtype, at::Device device) {
    std::shared_ptr<TalkerInputs> inputs(new TalkerInputs());
    inputs->dtype_ = dtype;
    inputs->device_ = device;
    const EncoderWeightReader reader(lookup, "talker.", dtype, device);
    const std::int64_t thinker_hidden = config.thinker_hidden_size;
    const std::int64_t inner = config.text.intermediate_size;
    const std::int64_t hidden = config.text.hidden_size;
    OMNI_TRY(inputs->text_, read_resize(reader, "text_projection", thinker_hidden, inner, hidden));
    OMNI_TRY(inputs->hidden_,
             read_resize(reader, "hidden_projection", thinker_hidden, inner, hidden));
    const std::string embed_name = "thinker.model.embed_tokens.weight";
    auto embed = lookup(embed_name);
    if (!embed) return fail(embed.error().with_context("Qwen3-Omni talker: '" + embed_name + "'"));
    inputs->thinker_embed_ = torch_bridge::to_torch(*embed);
    if (inputs->thinker_embed_.dim() != 2 || inputs->thinker_embed_.size(0) != thinker_vocab ||
        inputs->thinker_embed_.size(1) != thinker_hidden) {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni talker: '" + embed_name +
                                                     "' must be [" + std::to_string(thinker_vocab) +
                                                     ", " + std::to_string(thinker_hidden) + "]");
    }
    const OmniTokenIds& ids = config.ids;
    const std::vector<std::int32_t> special = {static_cast<std::int32_t>(ids.tts_pad),
                                               static_cast<std::int32_t>(ids.tts_bos),
                                               static_cast<std::int32_t>(ids.tts_eos)};
    try {
        OMNI_TRY(const at::Tensor projected, inputs->project_tokens(special));
        inputs->tts_pad_ = projected[0].clone();
        inputs->tts_bos_ = projected[1].clone();
        inputs->tts_eos_ = projected[2].clone();
    } catch (const c10::Error& error) {
        return fail(ErrorCode::internal,
                    std::string("Qwen3-Omni talker: ") + error.what_without_backtrace());
    }
    return inputs;
}

Result<Talker> load_talker(const OmniConfig& omni, const TalkerConfig& config,
                           const qwen3::WeightLookup& lookup, qwen3::Qwen3ModelOptions options) {
    OMNI_TRY(auto sections, mrope_sections(config.text));
    options.weight_prefix = "talker.";
    options.embed_name = "model.codec_embedding.weight";
    options.lm_head_name = "codec_head.weight";
    options.rotary = std::make_unique<qwen3::InterleavedMRotaryEmbedding>(
        static_cast<int>(config.text.head_dim), config.text.rope_theta,
        config.text.max_position_embeddings, sections, options.device);
    const at::ScalarType dtype = options.dtype;
    const at::Device device = options.device;
    Talker talker;
    OMNI_TRY(talker.model, qwen3::Qwen3Model::create(config.text, lookup, std::move(options)));
    OMNI_TRY(
        talker.predictor,
        CodePredictor::create(config, lookup, talker.model->weights().embed_tokens, dtype, device));
    OMNI_TRY(talker.inputs,
             TalkerInputs::load(config, omni.thinker_text.vocab_size, lookup, dtype, device));
    return talker;
}

}  // namespace omnirt::models::qwen3_omni
