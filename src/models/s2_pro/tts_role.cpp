#include "models/s2_pro/tts_role.h"

#include <ATen/ATen.h>

#include <string>

#include "torch_bridge/torch_tensor.h"

namespace omnirt::models::s2_pro {
namespace {

Error invalid(const std::string& message) {
    return Error{ErrorCode::invalid_argument, "S2-Pro: " + message};
}

// An integer host tensor or a list of ints, as int64.
Result<at::Tensor> read_ints(const Value& data, const std::string& key) {
    const Value* value = data.find(key);
    if (value == nullptr || value->is_null()) return at::Tensor();
    if (const Tensor* tensor = value->if_tensor()) {
        if (tensor->dtype() != DType::i32 && tensor->dtype() != DType::i64) {
            return fail(invalid("data." + key + " must be an int32 or int64 tensor"));
        }
        return torch_bridge::to_torch(*tensor).to(at::kCPU, at::kLong).contiguous();
    }
    const List* list = value->if_list();
    if (list == nullptr) return fail(invalid("data." + key + " must be a tensor or a list"));
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::int64_t* number = (*list)[i].if_int();
        if (number == nullptr) {
            return fail(invalid("data." + key + "[" + std::to_string(i) + "] must be an int"));
        }
        out.push_back(*number);
    }
    return at::tensor(out, at::kLong);
}

}  // namespace

S2ProRole::S2ProRole(std::shared_ptr<const FrameEmbedder> embedder)
    : embedder_(std::move(embedder)) {}

Result<engine::RequestSetup> S2ProRole::open_request(const StagePayload& payload) {
    OMNI_TRY(engine::RequestSetup setup, engine::read_request_setup(payload));
    const S2ProConfig& config = embedder_->config();
    OMNI_TRY(at::Tensor positions, read_ints(payload.data, "vq_positions"));
    OMNI_TRY(at::Tensor codes, read_ints(payload.data, "vq_codes"));
    if (!positions.defined() && !codes.defined()) return setup;
    if (!positions.defined() || !codes.defined()) {
        return fail(invalid("data.vq_positions and data.vq_codes go together"));
    }
    const std::int64_t frames = positions.numel();
    positions = positions.reshape({-1});
    if (codes.numel() != frames * config.num_codebooks) {
        return fail(invalid("data.vq_codes must be [" + std::to_string(frames) + ", " +
                            std::to_string(config.num_codebooks) + "] for " +
                            std::to_string(frames) + " vq_positions"));
    }
    if (frames == 0) return setup;  // a prompt without reference frames
    codes = codes.reshape({frames, config.num_codebooks});
    if (frames > 0 && (codes.min().item<std::int64_t>() < 0 ||
                       codes.max().item<std::int64_t>() >= config.codebook_size)) {
        return fail(invalid("data.vq_codes holds a code outside [0, " +
                            std::to_string(config.codebook_size) + ")"));
    }
    const std::int64_t* at_position = positions.data_ptr<std::int64_t>();
    const auto prompt = static_cast<std::int64_t>(setup.prompt.size());
    for (std::int64_t j = 0; j < frames; ++j) {
        const std::int64_t p = at_position[j];
        if (p < 0 || p >= prompt || (j > 0 && p <= at_position[j - 1])) {
            return fail(invalid("data.vq_positions[" + std::to_string(j) + "] = " +
                                std::to_string(p) + " is not an ascending prompt position"));
        }
        if (!config.ids.is_semantic(setup.prompt[static_cast<std::size_t>(p)])) {
            return fail(invalid("data.vq_positions[" + std::to_string(j) +
                                "]: the prompt id there is not a semantic token"));
        }
    }
    std::vector<std::int64_t> ids(frames);
    for (std::int64_t j = 0; j < frames; ++j) {
        ids[static_cast<std::size_t>(j)] = setup.prompt[static_cast<std::size_t>(at_position[j])];
    }
    const at::Tensor values = embedder_->embed(at::tensor(ids, at::kLong), codes);
    // One PositionRun per run of consecutive positions.
    std::int64_t begin = 0;
    for (std::int64_t j = 1; j <= frames; ++j) {
        if (j == frames || at_position[j] != at_position[j - 1] + 1) {
            setup.embeddings.push_back(
                engine::PositionRun{.begin = at_position[begin],
                                    .values = values.narrow(0, begin, j - begin).contiguous()});
            begin = j;
        }
    }
    return setup;
}

Result<at::Tensor> S2ProRole::feedback(engine::ArSequence& /*sequence*/,
                                       const engine::TokenStep& step) {
    const S2ProConfig& config = embedder_->config();
    if (static_cast<std::int64_t>(step.codes.size()) != config.num_codebooks) {
        return fail(ErrorCode::internal, "S2-Pro: a frame without its " +
                                             std::to_string(config.num_codebooks) + " codes");
    }
    const at::Tensor codes =
        at::tensor(std::vector<std::int64_t>(step.codes.begin(), step.codes.end()), at::kLong)
            .view({1, -1});
    return embedder_->embed(at::tensor({static_cast<std::int64_t>(step.token)}, at::kLong), codes)
        .select(0, 0);
}

}  // namespace omnirt::models::s2_pro
