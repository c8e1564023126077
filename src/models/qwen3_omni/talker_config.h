#pragma once
// The talker side of a Qwen3-Omni config.json (`talker_config`, qwen3-omni.md §5-6): the talker's
// decoder (a Qwen3-MoE config with a shared expert), the code predictor's decoder, the codec ids,
// the speakers, the thinker layer whose hidden states feed the talker, and the prefill plan of
// one request (§5.4): which thinker prompt rows the talker keeps and their 3-D positions.
// No libtorch.
//
// Thread safety: plain values and pure functions.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/qwen3/config.h"
#include "models/qwen3_omni/omni_config.h"

namespace omnirt::models::qwen3_omni {

struct CodecIds {
    std::int64_t pad = 2148, bos = 2149, eos = 2150;
    std::int64_t nothink = 2155, think_bos = 2156, think_eos = 2157;
};

struct TalkerConfig {
    qwen3::Qwen3Config text;       // talker_config.text_config
    qwen3::Qwen3Config predictor;  // talker_config.code_predictor_config
    std::int64_t num_code_groups = 16;
    std::int64_t accept_hidden_layer = 24;  // hidden_states index of the thinker (24)
    std::int64_t thinker_hidden_size = 2048;
    CodecIds codec;
    std::map<std::string, std::int64_t> speakers;  // lower-case name -> codec id
    OmniTokenIds ids;                              // the thinker's chat and tts ids

    // Codes per frame the code predictor adds (num_code_groups - 1).
    [[nodiscard]] std::int64_t residual_codes() const { return num_code_groups - 1; }
};

// Reads talker_config of a parsed OmniConfig. invalid_argument naming the key for a missing or
// malformed value ("Qwen3-Omni talker_config: accept_hidden_layer must be in [0, 48]");
// failed_precondition when the checkpoint has no talker (enable_audio_output false).
[[nodiscard]] Result<TalkerConfig> parse_talker_config(const OmniConfig& config);

// The speaker's codec id: `name` compared lower-cased; "" is "ethan" (transformers' default).
// invalid_argument listing the speakers for an unknown name.
[[nodiscard]] Result<std::int64_t> speaker_codec_id(const TalkerConfig& config,
                                                    std::string_view name);

// The ids the talker never samples: [vocab - 1024, vocab) except the codec EOS (§5.3).
[[nodiscard]] std::vector<std::int32_t> suppressed_codec_ids(const TalkerConfig& config);

// Rows of the talker prefill after the kept user segments: 3 role rows of the assistant turn,
// 4 control rows, tts_bos and the first text token (§5.4).
inline constexpr std::int64_t kAssistantPrefillRows = 9;

// One request's talker prefill (§5.4, steps 1-3 and 6): thinker prompt rows of the kept user
// segments (system segments and earlier assistant turns are dropped), then the assistant turn.
struct TalkerPlan {
    std::vector<std::int64_t> user_rows;  // thinker prompt rows, ascending
    std::int64_t assistant_begin = 0;     // the last <|im_start|> (its role must be assistant)
    // positions[axis][row] of the talker prompt (user rows, then kAssistantPrefillRows rows);
    // decode row p is at p + position_offset on every axis.
    std::vector<std::vector<std::int64_t>> positions;
    std::int64_t position_offset = 0;
    [[nodiscard]] std::int64_t prompt_rows() const {
        return static_cast<std::int64_t>(user_rows.size()) + kAssistantPrefillRows;
    }
};

// Plans the prefill of a thinker prompt `ids` whose 3-D positions are `positions` ([3][n];
// empty: 0..n-1 on every axis). Talker positions are those of get_rope_index over the talker's
// ids: each kept segment keeps its thinker positions shifted so that it starts right after the
// previous kept segment's maximum (exactly what get_rope_index gives, since every segment starts
// with a text token), the assistant rows follow one by one. invalid_argument when the prompt does
// not end with "<|im_start|>assistant\n", has no <|im_start|> at row 0 or a segment with another
// role than system / user / assistant, or positions of the wrong shape.
[[nodiscard]] Result<TalkerPlan> plan_talker_prefill(
    std::span<const std::int32_t> ids, const std::vector<std::vector<std::int64_t>>& positions,
    const OmniTokenIds& token_ids);

// Whether a thinker id is a media placeholder (audio / image / video pad): the talker takes the
// thinker's hidden state there instead of its text embedding.
[[nodiscard]] bool is_media_pad(std::int64_t id, const OmniTokenIds& token_ids);

}  // namespace omnirt::models::qwen3_omni
