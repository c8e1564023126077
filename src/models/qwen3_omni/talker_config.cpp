#include "models/qwen3_omni/talker_config.h"

#include <algorithm>
#include <cctype>

namespace omnirt::models::qwen3_omni {
namespace {

using nlohmann::json;

unexpected<Error> config_error(const std::string& message) {
    return fail(ErrorCode::invalid_argument, "Qwen3-Omni talker_config: " + message);
}

Status read_int(const json& object, const char* key, std::int64_t& out, bool required) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        if (required) return config_error(std::string(key) + " is missing");
        return ok_status();
    }
    if (!it->is_number_integer()) {
        return config_error(std::string(key) + " must be an integer, not " + it->dump());
    }
    out = it->get<std::int64_t>();
    return ok_status();
}

Result<const json*> object_at(const json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end() || !it->is_object()) {
        return config_error(std::string(key) + " must be an object");
    }
    return &*it;
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

}  // namespace

Result<TalkerConfig> parse_talker_config(const OmniConfig& omni) {
    const json& object = omni.talker_config;
    if (object.is_null()) {
        return fail(ErrorCode::failed_precondition,
                    "Qwen3-Omni: this checkpoint has no talker (enable_audio_output is false)");
    }
    if (!object.is_object()) return config_error("must be an object");
    TalkerConfig config;
    config.ids = omni.ids;
    OMNI_TRY(const json* text, object_at(object, "text_config"));
    auto parsed_text = qwen3::parse_qwen3_config(*text);
    if (!parsed_text) return fail(parsed_text.error().with_context("Qwen3-Omni talker_config"));
    config.text = std::move(*parsed_text);
    if (!config.text.is_moe()) return config_error("text_config: num_experts must be positive");
    OMNI_TRY(const json* predictor, object_at(object, "code_predictor_config"));
    auto parsed_predictor = qwen3::parse_qwen3_config(*predictor);
    if (!parsed_predictor) {
        return fail(parsed_predictor.error().with_context("Qwen3-Omni code_predictor_config"));
    }
    config.predictor = std::move(*parsed_predictor);
    if (config.predictor.is_moe()) {
        return config_error("code_predictor_config: a mixture of experts is not implemented");
    }
    if (config.predictor.hidden_size != config.text.hidden_size) {
        return config_error("code_predictor_config.hidden_size (" +
                            std::to_string(config.predictor.hidden_size) +
                            ") must equal text_config.hidden_size (" +
                            std::to_string(config.text.hidden_size) + ")");
    }
    OMNI_RETURN_IF_ERROR(read_int(object, "num_code_groups", config.num_code_groups, true));
    if (config.num_code_groups < 2 || config.num_code_groups > 64) {
        return config_error("num_code_groups must be in [2, 64], got " +
                            std::to_string(config.num_code_groups));
    }
    if (config.predictor.max_position_embeddings < config.num_code_groups) {
        return config_error(
            "code_predictor_config.max_position_embeddings is below "
            "num_code_groups");
    }
    OMNI_RETURN_IF_ERROR(read_int(object, "accept_hidden_layer", config.accept_hidden_layer, true));
    const std::int64_t thinker_layers = omni.thinker_text.num_hidden_layers;
    if (config.accept_hidden_layer < 0 || config.accept_hidden_layer > thinker_layers) {
        return config_error("accept_hidden_layer must be in [0, " + std::to_string(thinker_layers) +
                            "], got " + std::to_string(config.accept_hidden_layer));
    }
    config.thinker_hidden_size = omni.thinker_text.hidden_size;
    OMNI_RETURN_IF_ERROR(
        read_int(object, "thinker_hidden_size", config.thinker_hidden_size, false));
    if (config.thinker_hidden_size != omni.thinker_text.hidden_size) {
        return config_error("thinker_hidden_size (" + std::to_string(config.thinker_hidden_size) +
                            ") differs from the thinker's hidden_size");
    }
    CodecIds& codec = config.codec;
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_pad_id", codec.pad, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_bos_id", codec.bos, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_eos_token_id", codec.eos, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_nothink_id", codec.nothink, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_think_bos_id", codec.think_bos, false));
    OMNI_RETURN_IF_ERROR(read_int(object, "codec_think_eos_id", codec.think_eos, false));
    const std::int64_t vocab = config.text.vocab_size;
    for (std::int64_t id :
         {codec.pad, codec.bos, codec.eos, codec.nothink, codec.think_bos, codec.think_eos}) {
        if (id < 0 || id >= vocab) {
            return config_error("codec id " + std::to_string(id) +
                                " is outside the vocabulary of " + std::to_string(vocab));
        }
    }
    if (config.predictor.vocab_size > vocab) {
        return config_error("code_predictor_config.vocab_size exceeds the talker's vocabulary");
    }
    const auto speakers = object.find("speaker_id");
    if (speakers == object.end() || !speakers->is_object() || speakers->empty()) {
        return config_error("speaker_id must be a non-empty object of name -> codec id");
    }
    for (const auto& [name, id] : speakers->items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
            id.get<std::int64_t>() >= vocab) {
            return config_error("speaker_id." + name + " must be a codec id below " +
                                std::to_string(vocab));
        }
        config.speakers[lower(name)] = id.get<std::int64_t>();
    }
    return config;
}

Result<std::int64_t> speaker_codec_id(const TalkerConfig& config, std::string_view name) {
    const std::string key = name.empty() ? "ethan" : lower(name);
    if (const auto it = config.speakers.find(key); it != config.speakers.end()) return it->second;
    std::string known;
    for (const auto& [speaker, id] : config.speakers)
        known += (known.empty() ? "" : ", ") + speaker;
    return fail(ErrorCode::invalid_argument,
                "unknown voice '" + std::string(name) + "' (this model has: " + known + ")");
}

std::vector<std::int32_t> suppressed_codec_ids(const TalkerConfig& config) {
    std::vector<std::int32_t> out;
    const std::int64_t vocab = config.text.vocab_size;
    for (std::int64_t id = std::max<std::int64_t>(0, vocab - 1024); id < vocab; ++id) {
        if (id != config.codec.eos) out.push_back(static_cast<std::int32_t>(id));
    }
    return out;
}

bool is_media_pad(std::int64_t id, const OmniTokenIds& ids) {
    return id == ids.audio || id == ids.image || id == ids.video;
}

Result<TalkerPlan> plan_talker_prefill(std::span<const std::int32_t> ids,
                                       const std::vector<std::vector<std::int64_t>>& positions,
                                       const OmniTokenIds& token_ids) {
    const auto n = static_cast<std::int64_t>(ids.size());
    auto refuse = [](const std::string& why) {
        return fail(ErrorCode::invalid_argument, "Qwen3-Omni talker prefill: " + why);
    };
    if (!positions.empty()) {
        if (positions.size() != 3) return refuse("positions must have 3 axes");
        for (const auto& axis : positions) {
            if (static_cast<std::int64_t>(axis.size()) != n) {
                return refuse("positions must have one entry per prompt row");
            }
        }
    }
    auto position = [&](int axis, std::int64_t row) {
        return positions.empty()
                   ? row
                   : positions[static_cast<std::size_t>(axis)][static_cast<std::size_t>(row)];
    };
    std::vector<std::int64_t> starts;
    for (std::int64_t row = 0; row < n; ++row) {
        if (ids[static_cast<std::size_t>(row)] == token_ids.im_start) starts.push_back(row);
    }
    if (starts.empty()) return refuse("the prompt has no <|im_start|>");
    const std::int64_t last = starts.back();
    if (n - last != 3 || ids[static_cast<std::size_t>(last + 1)] != token_ids.assistant) {
        return refuse("the prompt must end with the assistant turn's \"<|im_start|>assistant\\n\"");
    }
    TalkerPlan plan;
    plan.assistant_begin = last;
    plan.positions.assign(3, {});
    std::int64_t next = 0;  // the talker's next free position
    for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
        const std::int64_t begin = starts[i];
        const std::int64_t end = starts[i + 1];
        if (end - begin < 2)
            return refuse("a turn at row " + std::to_string(begin) + " has no role");
        const std::int64_t role = ids[static_cast<std::size_t>(begin + 1)];
        if (role == token_ids.system || role == token_ids.assistant) continue;
        if (role != token_ids.user) {
            return refuse("the turn at row " + std::to_string(begin) + " has role id " +
                          std::to_string(role) + " (system, user or assistant expected)");
        }
        std::int64_t segment_max = next - 1;
        for (int axis = 0; axis < 3; ++axis) {
            const std::int64_t shift = next - position(axis, begin);
            for (std::int64_t row = begin; row < end; ++row) {
                const std::int64_t value = position(axis, row) + shift;
                plan.positions[static_cast<std::size_t>(axis)].push_back(value);
                segment_max = std::max(segment_max, value);
            }
        }
        for (std::int64_t row = begin; row < end; ++row) plan.user_rows.push_back(row);
        next = segment_max + 1;
    }
    for (std::int64_t k = 0; k < kAssistantPrefillRows; ++k) {
        for (auto& axis : plan.positions) axis.push_back(next + k);
    }
    plan.position_offset = next + kAssistantPrefillRows - plan.prompt_rows();
    return plan;
}

}  // namespace omnirt::models::qwen3_omni
