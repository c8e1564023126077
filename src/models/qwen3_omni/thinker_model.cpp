#include "models/qwen3_omni/thinker_model.h"

#include <utility>

namespace omnirt::models::qwen3_omni {

Result<std::array<int, 3>> mrope_sections(const qwen3::Qwen3Config& text) {
    const nlohmann::json& rope = text.rope_scaling;
    auto section = rope.is_object() ? rope.find("mrope_section") : rope.end();
    if (!rope.is_object() || section == rope.end() || !section->is_array() ||
        section->size() != 3) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: text_config.rope_scaling.mrope_section must list three "
                    "section sizes");
    }
    std::array<int, 3> out{};
    std::int64_t sum = 0;
    for (std::size_t axis = 0; axis < 3; ++axis) {
        const nlohmann::json& value = (*section)[axis];
        if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
            value.get<std::int64_t>() > 4096) {
            return fail(ErrorCode::invalid_argument,
                        "Qwen3-Omni config: mrope_section holds a bad size " + value.dump());
        }
        out[axis] = static_cast<int>(value.get<std::int64_t>());
        sum += out[axis];
    }
    if (sum * 2 != text.head_dim) {
        return fail(ErrorCode::invalid_argument,
                    "Qwen3-Omni config: mrope_section sums to " + std::to_string(sum) +
                        ", not head_dim / 2 = " + std::to_string(text.head_dim / 2));
    }
    return out;
}

Result<std::unique_ptr<qwen3::Qwen3Model>> load_thinker(const OmniConfig& config,
                                                        const qwen3::WeightLookup& lookup,
                                                        qwen3::Qwen3ModelOptions options) {
    const qwen3::Qwen3Config& text = config.thinker_text;
    OMNI_TRY(auto sections, mrope_sections(text));
    options.weight_prefix = "thinker.";
    options.rotary = std::make_unique<qwen3::InterleavedMRotaryEmbedding>(
        static_cast<int>(text.head_dim), text.rope_theta, text.max_position_embeddings, sections,
        options.device);
    return qwen3::Qwen3Model::create(text, lookup, std::move(options));
}

}  // namespace omnirt::models::qwen3_omni
