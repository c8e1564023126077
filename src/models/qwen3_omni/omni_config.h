#pragma once
// The top level of a Qwen3-Omni-MoE config.json (transformers' Qwen3OmniMoeConfig): the token
// ids the runtime needs, the thinker's text decoder (a Qwen3-MoE config), and the raw objects of
// the audio / vision encoders, the talker and code2wav, which their own parsers read. Key
// spellings of both transformers generations are accepted (see docs/models/qwen3_omni.md).
//
// Values come from the file: transformers' class defaults are those of Qwen2.5-Omni and wrong for
// the released checkpoint, so only keys the released config.json omits take a default here.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3/config.h"

namespace omnirt::models::qwen3_omni {

inline constexpr std::string_view kModelType = "qwen3_omni_moe";
inline constexpr std::string_view kArchitecture = "Qwen3OmniMoeForConditionalGeneration";

// Token ids of the chat layout and the media placeholders (checkpoint values as defaults).
struct OmniTokenIds {
    std::int64_t im_start = 151644, im_end = 151645;
    std::int64_t system = 8948, user = 872, assistant = 77091;
    std::int64_t tts_pad = 151671, tts_bos = 151672, tts_eos = 151673;
    std::int64_t audio = 151675, audio_start = 151669, audio_end = 151670;
    std::int64_t image = 151655, video = 151656;
    std::int64_t vision_start = 151652, vision_end = 151653;
};

struct OmniConfig {
    bool enable_audio_output = true;
    OmniTokenIds ids;
    std::int64_t position_id_per_seconds = 13;
    qwen3::Qwen3Config thinker_text;  // thinker_config.text_config
    nlohmann::json audio_config;      // thinker_config.audio_config
    nlohmann::json vision_config;     // thinker_config.vision_config
    nlohmann::json talker_config;     // null when enable_audio_output is false and it is absent
    nlohmann::json code2wav_config;   // likewise
};

// Parses a config.json object. invalid_argument naming the key ("thinker_config.text_config:
// hidden_size must be positive") for a missing or malformed value, and when the model_type is
// not qwen3_omni_moe.
[[nodiscard]] Result<OmniConfig> parse_omni_config(const nlohmann::json& json);

// Generated checkpoint sizes: "tiny" (tests) and "small" (benchmarks on a CPU), with the real
// vocabulary, token ids and codec ids; "30b-a3b" is Qwen3-Omni-30B-A3B-Instruct's config.json
// (for --load-format dummy).
[[nodiscard]] std::vector<std::string> omni_preset_names();
// config.json of a preset with torch_dtype `dtype` ("bfloat16"); not_found for other names.
// `role_ids` overrides system / user / assistant (the generated tokenizer's ids).
[[nodiscard]] Result<nlohmann::ordered_json> omni_preset(std::string_view name,
                                                         const std::string& dtype,
                                                         const OmniTokenIds& role_ids = {});

}  // namespace omnirt::models::qwen3_omni
